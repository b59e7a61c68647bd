package main

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/routerkit/router/internal/otlptest"
)

// receivers are the scripts' OTLP receivers, one per script at most.
var receivers sync.Map // *testscript.TestScript -> *otlptest.Receiver

// cmdOTLPReceiver starts an OTLP trace collector (gRPC and HTTP, internal/otlptest) for
// the rest of the script and sets OTLP_GRPC and OTLP_HTTP to its host:port addresses:
//
//	otlp-receiver
//	envsubst router.yaml   # tracing: {endpoint: "http://${OTLP_HTTP}/v1/traces", protocol: http}
func cmdOTLPReceiver(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: otlp-receiver")
	}
	rc, err := otlptest.Start()
	ts.Check(err)
	if _, loaded := receivers.LoadOrStore(ts, rc); loaded {
		rc.Close()
		ts.Fatalf("otlp-receiver: already started")
	}
	ts.Defer(func() {
		receivers.Delete(ts)
		rc.Close()
	})
	ts.Setenv("OTLP_GRPC", rc.GRPCAddr())
	ts.Setenv("OTLP_HTTP", rc.HTTPAddr())
}

// cmdOTLPSpans prints the spans the receiver got, one JSON object a line, sorted by
// name within a trace: those of trace TRACEID, or all of them.
//
//	otlp-spans 4bf92f3577b34da6a3ce929d0e0e4736
//	stdout '"name":"POST /v1/chat/completions","kind":"server"'
func cmdOTLPSpans(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 {
		ts.Fatalf("usage: otlp-spans [TRACEID]")
	}
	v, ok := receivers.Load(ts)
	if !ok {
		ts.Fatalf("otlp-spans: run otlp-receiver first")
	}
	rc := v.(*otlptest.Receiver)
	spans := rc.Spans()
	if len(args) == 1 {
		spans = rc.Find(args[0])
	}
	for _, s := range spans {
		line, err := json.Marshal(s)
		ts.Check(err)
		fmt.Fprintf(ts.Stdout(), "%s\n", line)
	}
}
