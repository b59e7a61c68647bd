package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
	"github.com/routerkit/router/runtime/token/hf"
)

// Fleet is a set of simulated engines running in this process. Prefill and decode engines
// of one fleet find each other through their bootstrap addresses.
type Fleet struct {
	engines []*Engine
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	err     error
}

// Start binds and starts one engine per spec; when it returns, every engine accepts
// connections. The fleet stops when ctx ends or Close is called.
func Start(ctx context.Context, specs []EngineSpec) (*Fleet, error) {
	if len(specs) == 0 {
		return nil, errors.New("no engines to simulate")
	}
	rs := newRooms()
	f := &Fleet{}
	seen := make(map[string]bool)
	for _, spec := range specs {
		if seen[spec.ID] {
			f.closeEngines()
			return nil, fmt.Errorf("duplicate engine id %q", spec.ID)
		}
		seen[spec.ID] = true
		e, err := newEngine(spec, rs)
		if err != nil {
			f.closeEngines()
			return nil, fmt.Errorf("start simulated engines: %w", err)
		}
		f.engines = append(f.engines, e)
		switch {
		case e.spec.Kind == plan.KindVLLM:
			// vLLM hands KV over by engine and request id, whatever the role: with
			// kv_both every engine can prefill for a remote decode.
			rs.local["vllm:"+e.spec.ID] = true
		case e.spec.Role == plan.RolePrefill:
			rs.local[bootstrapAddr("127.0.0.1", e.spec.BootstrapPort)] = true
		}
	}
	ctx, f.cancel = context.WithCancel(ctx)
	for _, e := range f.engines {
		e.start(ctx, &f.wg)
	}
	// Closing twice is harmless: the second call waits for the first.
	context.AfterFunc(ctx, func() { _ = f.Close() })
	return f, nil
}

// Engines returns the engines in spec order.
func (f *Fleet) Engines() []*Engine { return f.engines }

// Engine returns the engine with this id, or nil.
func (f *Fleet) Engine(id string) *Engine {
	for _, e := range f.engines {
		if e.spec.ID == id {
			return e
		}
	}
	return nil
}

// Close stops every engine and waits for their goroutines. It is safe to call more than
// once.
func (f *Fleet) Close() error {
	f.once.Do(func() {
		f.err = f.closeEngines()
		f.cancel()
		f.wg.Wait()
	})
	return f.err
}

func (f *Fleet) closeEngines() error {
	var errs []error
	for _, e := range f.engines {
		if err := e.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SpecsFromPlan returns one spec per engine of a compiled plan: at the host and port of
// its URL, with its model, role, bootstrap port, DP size, KV event publisher and its model's
// tokenizer (loaded once per model). cfg is
// the performance model of every engine; a plan's KV block size overrides cfg.BlockSize.
func SpecsFromPlan(p *plan.Plan, cfg Config) ([]EngineSpec, error) {
	specs := make([]EngineSpec, 0, len(p.Engines))
	toks := map[string]token.Tokenizer{}
	for i := range p.Models {
		tok, err := hf.ForModel(&p.Models[i])
		if err != nil {
			return nil, fmt.Errorf("loading the tokenizer of model %s: %w", p.Models[i].Name, err)
		}
		toks[p.Models[i].Name] = tok
	}
	for _, pe := range p.Engines {
		u, err := url.Parse(pe.URL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("engine %s: url %q has no host", pe.ID, pe.URL)
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		spec := EngineSpec{
			ID: pe.ID, Model: pe.Model, Kind: pe.Kind, Role: pe.Role, Addr: addr,
			BootstrapPort: pe.BootstrapPort, DPSize: pe.DPSize, Config: cfg, Tokenizer: toks[pe.Model],
		}
		if kv := pe.KVEvents; kv != nil {
			spec.KVEvents = &KVEventsSpec{Endpoint: kv.Endpoint, Topic: kv.Topic, Encoding: kv.Encoding, Dial: kv.Mode == plan.KVBind, ReplayEndpoint: kv.ReplayEndpoint}
			if kv.BlockSize > 0 {
				spec.Config.BlockSize = kv.BlockSize
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// PlainSGLang returns the specs of n plain SGLang engines E1…En serving model, each with
// cfg and, when kv is not nil, a KV-event publisher of its own made from kv (an engine
// copies it): the fleet that the benchmark programs start.
func PlainSGLang(n int, model string, cfg Config, kv *KVEventsSpec) []EngineSpec {
	specs := make([]EngineSpec, n)
	for i := range specs {
		specs[i] = EngineSpec{ID: fmt.Sprintf("E%d", i+1), Model: model, Kind: plan.KindSGLang, Role: plan.RolePlain, Config: cfg, KVEvents: kv}
	}
	return specs
}
