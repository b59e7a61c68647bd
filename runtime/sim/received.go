package sim

import (
	"net/http"
	"strings"
)

// Received is what an engine's last inference request carried for tracing it: the
// W3C trace context and the request id. Tests compare it with what the client sent the
// router (GET /sim/received, Engine.Received).
type Received struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate,omitempty"`
	RequestID   string `json:"x_request_id"`
}

// Received returns what the engine's last POST carried; zero before any.
func (e *Engine) Received() Received {
	if r := e.received.Load(); r != nil {
		return *r
	}
	return Received{}
}

// recordReceived wraps the engine's routes so that every POST but the simulator's own
// (/sim/...) is remembered as the last one received.
func (e *Engine) recordReceived(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !strings.HasPrefix(r.URL.Path, "/sim/") {
			e.received.Store(&Received{Traceparent: r.Header.Get("Traceparent"), Tracestate: r.Header.Get("Tracestate"),
				RequestID: r.Header.Get("X-Request-Id")})
		}
		next.ServeHTTP(w, r)
	})
}

func (e *Engine) handleReceived(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, e.Received())
}
