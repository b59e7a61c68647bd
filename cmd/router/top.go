package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/tui"
)

func topCommand() *cli.Command {
	return &cli.Command{
		Name:  "top",
		Usage: "watch a running router: engines, load, in-flight, picks, rejections",
		Description: `Polls the router's GET /admin/state and shows three views, switched with tab:
engines (health, load, KV usage, in-flight, picks/s, rejections/s, report age and
a sparkline of the last minute's load), buckets (requests/s, fall-throughs, errors
by status) and recent decisions. Press ? for the keys. A router that cannot be
reached or refuses the token shows as disconnected, with the reason, until it
answers again.

--once prints the engines view once as plain text and exits: 0 when the router
answered, 1 when it could not be reached or refused the token.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "router", Value: "http://127.0.0.1:30000", Usage: "the router's base `URL`"},
			&cli.StringFlag{Name: "token", Usage: "admin bearer `TOKEN`, when the router sets admin_token", EnvVars: []string{"ROUTER_ADMIN_TOKEN"}},
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "time between polls, a `DURATION` such as 500ms or 2s"},
			&cli.BoolFlag{Name: "once", Usage: "print the engines view once as plain text and exit"},
		},
		Action: runTop,
	}
}

func runTop(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("top takes no arguments; name the router with --router URL")
	}
	base, err := routerURL(c.String("router"))
	if err != nil {
		return err
	}
	interval := c.Duration("interval")
	if interval <= 0 {
		return usageError("--interval must be positive, got %s", interval)
	}
	// No client timeout: the monitor bounds every poll with its context.
	fetch := tui.HTTPFetch(&http.Client{}, base, c.String("token"))
	if c.Bool("once") {
		out, err := tui.Once(c.Context, fetch, base)
		if errors.Is(err, tui.ErrUnauthorized) {
			return fmt.Errorf("%w (pass --token or set ROUTER_ADMIN_TOKEN)", err)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(c.App.Writer, out)
		return err
	}
	m := tui.New(tui.Options{Fetch: fetch, Source: base, Interval: interval})
	_, err = tea.NewProgram(m, tea.WithContext(c.Context), tea.WithOutput(c.App.Writer)).Run()
	return monitorExit(err)
}

// monitorExit is how the monitor's end becomes an exit status. Ctrl+C is the usual way to
// leave a terminal monitor, as q is: a key press quits cleanly, and a SIGINT (Ctrl+C where
// the terminal is not in raw mode, or kill -INT) ends bubbletea with ErrInterrupted, which
// is no failure either. Both exit 0.
func monitorExit(err error) error {
	if err == nil || errors.Is(err, tea.ErrInterrupted) {
		return nil
	}
	return fmt.Errorf("running the monitor: %w", err)
}

// routerURL checks --router and returns it without a trailing slash. A bare HOST:PORT
// means http://HOST:PORT, as `router serve --listen` prints it.
func routerURL(raw string) (string, error) {
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError("--router must be an http or https URL such as http://127.0.0.1:30000, got %q", raw)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}
