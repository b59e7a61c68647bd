package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/control"
)

// The request log line names the engines as a group in stage order and the error only
// when there is one; /admin/state gets the engines and reasons as maps.
func TestRequestLogRecord(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	s := &generation{Server: &Server{log: slog.New(h), reqLog: h}}
	pd := &record{Decision: control.Decision{RequestID: "r-1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Model: "m", Bucket: "b", Status: 200, DurationMS: 1.5, InputTokens: 7}, npicked: 2,
		picked: [2]stagePick{{stage: "prefill", engine: "P1", reason: "least loaded"}, {stage: "decode", engine: "D1", reason: "only candidate"}}}
	s.logRequest(pd, false)
	failed := &record{Decision: control.Decision{RequestID: "chatcmpl-x", Model: "m", Status: 503, Error: "admission_rejected: full"}}
	s.logRequest(failed, true)
	want := `level=INFO msg=request model=m bucket=b engines.decode=D1 engines.prefill=P1 status=200 duration_ms=1.5 input_tokens=7 request_id=r-1 trace_id=4bf92f3577b34da6a3ce929d0e0e4736
level=INFO msg=request model=m bucket="" status=503 duration_ms=0 input_tokens=0 error="admission_rejected: full" request_id=chatcmpl-x request_id_replaced=true
`
	if buf.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", buf.String(), want)
	}

	pd.expand()
	if pd.Engines["prefill"] != "P1" || pd.Engines["decode"] != "D1" || pd.Reasons["decode"] != "only candidate" || len(pd.Engines) != 2 {
		t.Errorf("expanded decision: %+v %+v", pd.Engines, pd.Reasons)
	}
	if failed.expand(); failed.Engines != nil || failed.Reasons != nil {
		t.Errorf("a decision without picks got maps: %+v", failed)
	}
	if strings.Contains(buf.String(), "map[") {
		t.Error("a map reached the log")
	}
}
