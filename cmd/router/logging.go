package main

import (
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/runtime/plan"
)

// durationsAsStrings renders durations as Go duration strings ("30s", "1.5ms") in every
// log format: slog's JSON handler would write nanoseconds as a bare integer, which a
// reader of the logs cannot tell from a count.
//
// A map with string keys becomes a group of fields, in key order: the text handler would
// print Go's map[plain:E1], which log tools cannot split into fields (engines.plain=E1).
func durationsAsStrings(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, a.Value.Duration().String())
	case slog.KindAny:
		v := reflect.ValueOf(a.Value.Any())
		if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.String {
			return a
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		attrs := make([]any, len(keys))
		for i, k := range keys {
			attrs[i] = slog.Any(k.String(), v.MapIndex(k).Interface())
		}
		return slog.Group(a.Key, attrs...)
	}
	return a
}

// announce says where the router listens. With --log-format json it is a log record like
// every other line, so a log collector parses the whole stream; as text it is the plain
// line on stdout that scripts wait for.
func announce(c *cli.Context, log *slog.Logger, addr net.Addr, p *plan.Plan) {
	scheme := "http"
	if p.TLS != nil {
		scheme = "https"
	}
	if c.String("log-format") == "json" {
		log.Info("router listening", "url", scheme+"://"+addr.String(), "models", modelNames(p))
		return
	}
	fmt.Fprintf(c.App.Writer, "router listening on %s://%s, models: %s\n", scheme, addr, modelNames(p))
}

// asDefault makes l the process's default logger, which also routes the standard log
// package through it: net/http's own messages (a client's malformed TLS handshake, a
// panic in a handler) then come out in the chosen format too, not as a stray text line
// in a JSON stream.
func asDefault(l *slog.Logger) *slog.Logger {
	slog.SetDefault(l)
	return l
}
