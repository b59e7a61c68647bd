package sim

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

func TestSpecsFromPlan(t *testing.T) {
	p := &plan.Plan{Engines: []plan.Engine{
		{ID: "P1", URL: "http://127.0.0.1:33001", Model: "llama", Role: plan.RolePrefill, BootstrapPort: 8998, DPSize: 1},
		{ID: "D1", URL: "http://localhost:33101/", Model: "llama", Role: plan.RoleDecode, DPSize: 2,
			KVEvents: &plan.KVEvents{Endpoint: "tcp://*:5557", Topic: "kv", BlockSize: 64}},
	}}
	cfg := fastConfig()
	specs, err := SpecsFromPlan(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p1, d1 := specs[0], specs[1]
	if p1.Addr != "127.0.0.1:33001" || p1.Role != plan.RolePrefill || p1.BootstrapPort != 8998 || p1.KVEvents != nil || p1.Config != cfg {
		t.Fatalf("P1 spec = %+v", p1)
	}
	if d1.Addr != "localhost:33101" || d1.DPSize != 2 || *d1.KVEvents != (KVEventsSpec{Endpoint: "tcp://*:5557", Topic: "kv"}) || d1.Config.BlockSize != 64 {
		t.Fatalf("D1 spec = %+v", d1)
	}
	if _, err := SpecsFromPlan(&plan.Plan{Engines: []plan.Engine{{ID: "X", URL: "::"}}}, cfg); err == nil {
		t.Fatal("a URL without host was accepted")
	}
}

func TestStartRejectsBadSpecs(t *testing.T) {
	tests := []struct {
		name  string
		specs []EngineSpec
		want  string
	}{
		{"none", nil, "no engines"},
		{"duplicate", []EngineSpec{{ID: "A", Model: "m"}, {ID: "A", Model: "m"}}, `duplicate engine id "A"`},
		{"no model", []EngineSpec{{ID: "A"}}, "engine id and model are required"},
		{"role", []EngineSpec{{ID: "A", Model: "m", Role: "router"}}, `unknown role "router"`},
		{"not loopback", []EngineSpec{{ID: "A", Model: "m", Addr: "0.0.0.0:0"}}, "loopback addresses only"},
		{"config", []EngineSpec{{ID: "A", Model: "m", Config: Config{BlockSize: 16}}}, "max_running_requests must be positive"},
		{"faults", []EngineSpec{{ID: "A", Model: "m", Faults: Faults{FailStatus: 302}}}, "fail_status"},
		{"kv endpoint", []EngineSpec{{ID: "A", Model: "m", KVEvents: &KVEventsSpec{Endpoint: "ipc:///tmp/x"}}}, "only tcp://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Start(t.Context(), tt.specs)
			if err == nil {
				f.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestStartReleasesPortsOnFailure(t *testing.T) {
	busy := strings.TrimPrefix(startEngine(t).URL(), "http://")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close()
	// B cannot bind, so A, already bound, must be closed again.
	_, err = Start(t.Context(), []EngineSpec{{ID: "A", Model: "m", Addr: free}, {ID: "B", Model: "m", Addr: busy}})
	if err == nil || !strings.Contains(err.Error(), "engine B") {
		t.Fatalf("err = %v, want engine B failing to bind", err)
	}
	l, err = net.Listen("tcp", free)
	if err != nil {
		t.Fatalf("engine A's port is still taken: %v", err)
	}
	l.Close()
}

func TestFleetStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	f, err := Start(ctx, []EngineSpec{{ID: "A", Model: "m", Config: fastConfig()}})
	if err != nil {
		t.Fatal(err)
	}
	url := f.Engines()[0].URL() + "/health"
	cancel()
	wait.For(t, "the engine to stop serving", func() bool {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	if err := f.Close(); err != nil {
		t.Fatalf("Close after the context ended: %v", err)
	}
}
