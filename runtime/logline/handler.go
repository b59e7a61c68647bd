// Package logline holds a slog handler for lines written once per request. For a record
// of strings, integers, floats, booleans and groups of them it writes what slog's text
// or JSON handler writes, byte for byte, without their general machinery: with the
// standard handler the request log was 12–25 µs of the router's 280 µs of CPU per
// streamed request at one client, on a path whose caches are cold each time. Any other
// record goes to the standard handler.
package logline

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Handler formats the records it can and passes the rest to slog's own handler.
type Handler struct {
	mu    *sync.Mutex // serializes writes to w, the standard handler's included
	w     io.Writer
	json  bool
	level slog.Leveler
	std   slog.Handler
	// second is the text time of the last record's second, which the records of a
	// second share: formatting a time was a tenth of the request line's cost.
	second atomic.Pointer[stamp]
}

// stamp is a second's text in one location, around its milliseconds.
type stamp struct {
	unix int64
	loc  *time.Location
	head string // up to the milliseconds: "2006-01-02T15:04:05."
	zone string // after them: "Z" or "-07:00"
}

// New returns a handler writing to w in slog's text format, or its JSON format when json
// is set. opts go to the standard handler, which formats the records this one cannot;
// opts.ReplaceAttr must leave strings, numbers, booleans and groups as they are, because
// records made only of those never reach it. opts.AddSource is not supported.
func New(w io.Writer, json bool, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	h := &Handler{mu: new(sync.Mutex), w: w, json: json, level: opts.Level}
	if h.level == nil {
		h.level = slog.LevelInfo
	}
	lw := lockedWriter{h.mu, w}
	if json {
		h.std = slog.NewJSONHandler(lw, opts)
	} else {
		h.std = slog.NewTextHandler(lw, opts)
	}
	return h
}

// lockedWriter gives the standard handler the fast path's lock.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Enabled reports whether level is at or above the handler's.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.level.Level()
}

// WithAttrs and WithGroup return the standard handler's: a logger with attributes of
// its own is not the per-request line this handler is for.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.std.WithAttrs(attrs) }

// WithGroup returns the standard handler's.
func (h *Handler) WithGroup(name string) slog.Handler { return h.std.WithGroup(name) }

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle writes r in one call to the writer.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	simple := true
	r.Attrs(func(a slog.Attr) bool {
		simple = plain(a, true)
		return simple
	})
	if y := r.Time.Year(); !simple || r.Time.IsZero() || y < 0 || y >= 10000 {
		return h.std.Handle(ctx, r)
	}
	bp := buffers.Get().(*[]byte)
	f := formatter{buf: (*bp)[:0], json: h.json, second: &h.second}
	f.open()
	f.key("", "time")
	f.time(r.Time)
	f.key("", "level")
	f.str(r.Level.String())
	f.key("", "msg")
	f.str(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		f.attr(a)
		return true
	})
	f.close()
	h.mu.Lock()
	_, err := h.w.Write(f.buf)
	h.mu.Unlock()
	if cap(f.buf) <= 16<<10 {
		*bp = f.buf
		buffers.Put(bp)
	}
	return err
}

// plain reports whether the fast path formats a exactly as slog would: a named
// attribute of a scalar kind, or (at the top) a named group of them.
func plain(a slog.Attr, top bool) bool {
	if a.Key == "" {
		return false
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool:
		return true
	case slog.KindFloat64:
		f := v.Float64()
		return !math.IsNaN(f) && !math.IsInf(f, 0) // JSON cannot hold them: slog writes an error
	case slog.KindGroup:
		if !top {
			return false
		}
		for _, m := range v.Group() {
			if !plain(m, false) {
				return false
			}
		}
		return true
	}
	return false
}

// formatter appends one record in slog's text or JSON layout.
type formatter struct {
	buf    []byte
	json   bool
	sep    bool // a field was written at this level
	second *atomic.Pointer[stamp]
}

func (f *formatter) open() {
	if f.json {
		f.buf = append(f.buf, '{')
	}
}

func (f *formatter) close() {
	if f.json {
		f.buf = append(f.buf, '}')
	}
	f.buf = append(f.buf, '\n')
}

// key writes a field's separator and key; group is its group's name, which prefixes the
// key in text (engines.plain).
func (f *formatter) key(group, k string) {
	if f.sep {
		if f.json {
			f.buf = append(f.buf, ',')
		} else {
			f.buf = append(f.buf, ' ')
		}
	}
	f.sep = true
	switch {
	case f.json:
		f.buf = append(f.buf, '"')
		f.buf = appendEscaped(f.buf, k)
		f.buf = append(f.buf, '"', ':')
		return
	case group == "":
		f.str(k)
	case !needsQuoting(group+".") && !needsQuoting(k): // group+"." does not escape
		f.buf = append(append(append(f.buf, group...), '.'), k...)
	default:
		f.buf = strconv.AppendQuote(f.buf, group+"."+k)
	}
	f.buf = append(f.buf, '=')
}

func (f *formatter) str(s string) {
	switch {
	case f.json:
		f.buf = append(f.buf, '"')
		f.buf = appendEscaped(f.buf, s)
		f.buf = append(f.buf, '"')
	case needsQuoting(s):
		f.buf = strconv.AppendQuote(f.buf, s)
	default:
		f.buf = append(f.buf, s...)
	}
}

// time is slog's: RFC 3339 with milliseconds in text, with nanoseconds in JSON.
func (f *formatter) time(t time.Time) {
	if f.json {
		f.buf = append(f.buf, '"')
		f.buf = t.AppendFormat(f.buf, time.RFC3339Nano)
		f.buf = append(f.buf, '"')
		return
	}
	// slog's appendRFC3339Millis: the time truncated to milliseconds, always three
	// digits of them, in t's location.
	st := f.second.Load()
	if st == nil || st.unix != t.Unix() || st.loc != t.Location() {
		b := t.Truncate(time.Second).AppendFormat(nil, "2006-01-02T15:04:05.000Z07:00")
		const head = len("2006-01-02T15:04:05.")
		st = &stamp{unix: t.Unix(), loc: t.Location(), head: string(b[:head]), zone: string(b[head+3:])}
		f.second.Store(st)
	}
	ms := t.Nanosecond() / 1e6
	f.buf = append(f.buf, st.head...)
	f.buf = append(f.buf, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	f.buf = append(f.buf, st.zone...)
}

func (f *formatter) attr(a slog.Attr) {
	v := a.Value
	if v.Kind() == slog.KindGroup {
		members := v.Group()
		if len(members) == 0 {
			return // slog leaves an empty group out
		}
		if !f.json {
			for _, m := range members {
				f.key(a.Key, m.Key)
				f.value(m.Value)
			}
			return
		}
		f.key("", a.Key)
		f.buf = append(f.buf, '{')
		f.sep = false
		for _, m := range members {
			f.key("", m.Key)
			f.value(m.Value)
		}
		f.buf = append(f.buf, '}')
		f.sep = true
		return
	}
	f.key("", a.Key)
	f.value(v)
}

func (f *formatter) value(v slog.Value) {
	switch v.Kind() {
	case slog.KindString:
		f.str(v.String())
	case slog.KindInt64:
		f.buf = strconv.AppendInt(f.buf, v.Int64(), 10)
	case slog.KindUint64:
		f.buf = strconv.AppendUint(f.buf, v.Uint64(), 10)
	case slog.KindBool:
		f.buf = strconv.AppendBool(f.buf, v.Bool())
	case slog.KindFloat64:
		x := v.Float64()
		switch b, ok := appendThousandths(f.buf, x); {
		case ok:
			f.buf = b
		case f.json:
			f.buf = appendJSONFloat(f.buf, x)
		default:
			f.buf = strconv.AppendFloat(f.buf, x, 'g', -1, 64)
		}
	}
}

// appendThousandths writes x as both of slog's handlers would when x is a positive whole
// number of thousandths below a million, as a request's duration_ms is, and reports
// false for any other x. Such an x is m/1000 for an integer m of at most nine digits,
// whose decimal form is the shortest that reads back as x (floats that close to a
// million are 1e-10 apart, far closer than a thousandth), in fixed notation, which is
// what strconv's 'g' and encoding/json's 'f' choose below a million: the float
// formatting was a tenth of the log line's cost.
func appendThousandths(b []byte, x float64) ([]byte, bool) {
	m := math.Round(x * 1000)
	if !(m > 0 && m < 1e9) || m/1000 != x {
		return b, false
	}
	n := int64(m)
	b = strconv.AppendInt(b, n/1000, 10)
	frac := n % 1000
	if frac == 0 {
		return b, true
	}
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b, true
}

// appendJSONFloat writes a float as encoding/json does, which slog's JSON handler calls.
func appendJSONFloat(b []byte, x float64) []byte {
	format := byte('f')
	if abs := math.Abs(x); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, x, format, -1, 64)
	if format == 'e' { // e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// needsQuoting is slog's rule for a text key or value: empty, or holding a space, '=',
// a character JSON would escape (but a backslash), or a rune that is not printable.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if !bare[b] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// bare marks the ASCII bytes a text value may hold unquoted: those JSON would not escape
// (and the backslash), but space and '='.
var bare = func() (t [utf8.RuneSelf]bool) {
	for b := range t {
		t[b] = b == '\\' || safe(byte(b)) && b != ' ' && b != '='
	}
	return t
}()

// safe reports whether an ASCII byte goes into a JSON string as it is (slog's safeSet).
func safe(b byte) bool { return b >= 0x20 && b != '"' && b != '\\' }

const hex = "0123456789abcdef"

// appendEscaped is slog's appendEscapedJSONString: the body of a JSON string.
func appendEscaped(buf []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe(b) {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			buf = append(append(buf, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			buf = append(append(buf, s[start:i]...), `\u202`...)
			buf = append(buf, hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(buf, s[start:]...)
}
