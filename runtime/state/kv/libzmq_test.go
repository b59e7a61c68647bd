package kv

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// TestLibzmqPublishers checks the router's ZMQ sockets against libzmq itself, through
// Debian's python3-zmq (`make python3-zmq` installs it; the test fails without it): a
// libzmq PUB socket that binds, which the router dials, and one that dials the router's
// bind endpoint, each publishing SGLang's wire format. The router dials the first with
// its own SUB reader (zmtp.Sub) and with go-zeromq's, the switch back.
func TestLibzmqPublishers(t *testing.T) {
	if out, err := exec.Command("/usr/bin/python3", "-c", "import zmq, msgpack").CombinedOutput(); err != nil {
		t.Fatalf("/usr/bin/python3 lacks zmq or msgpack (run `make python3-zmq`): %v: %s", err, out)
	}
	ids := make([]uint32, 32)
	for i := range ids {
		ids[i] = uint32(i + 1)
	}
	cases := []struct {
		pubMode   string
		transport plan.EngineTransport // the reader of a dialled publisher (subReaders)
	}{{"bind", plan.TransportRouter}, {"bind", plan.TransportNetHTTP}, {"connect", plan.TransportRouter}}
	for _, c := range cases {
		pubMode := c.pubMode
		t.Run("pub "+pubMode+" "+string(c.transport), func(t *testing.T) {
			endpoint := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
			kv := &plan.KVEvents{Mode: plan.KVConnect, Endpoint: endpoint, Topic: "kv@E", BlockSize: 16}
			if pubMode == "connect" {
				kv.Mode = plan.KVBind
			}
			p := &plan.Plan{EngineTransport: c.transport, Engines: []plan.Engine{{ID: "E", Model: "m", URL: "http://127.0.0.1:8000", KVEvents: kv}}}
			ix, _ := subscribe(t, p)

			var stderr strings.Builder
			ctx, stop := context.WithCancel(t.Context())
			cmd := exec.CommandContext(ctx, "/usr/bin/python3", "testdata/libzmq_pub.py", pubMode, endpoint, "kv@E")
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			deadline := time.After(wait.Timeout)
			for !slices.Equal(ix.Lookup(ids, 16), []Match{{Engine: "E", Blocks: 2}}) {
				select {
				case err := <-exited:
					t.Fatalf("the libzmq publisher exited: %v: %s", err, stderr.String())
				case <-deadline:
					t.Fatalf("the router never indexed the libzmq publisher's pages: lookup %v, %+v", ix.Lookup(ids, 16), ix.Stats("E"))
				case <-time.After(20 * time.Millisecond):
				}
			}
			if s := ix.Stats("E"); s.Undecodable != 0 {
				t.Errorf("stats %+v, want every message decoded", s)
			}
			stop()
			<-exited
		})
	}
}
