package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/state/load/fixture"
)

func explainCommand() *cli.Command {
	return &cli.Command{
		Name:  "explain",
		Usage: "show how one request would be routed, bucket by bucket",
		Description: `Runs the serving selection code for one request against a load fixture and
prints the ordered compatible buckets (and why every other bucket was excluded),
each bucket attempt with its groups' candidates and their load, the loads each
policy read, admission verdicts, the picks and their reasons, and finally the
selection or the error with the HTTP status serving would return.

The load fixture (--load, YAML or JSON) gives engine state by id:
  engines: {D1: {running: 64, waiting: 3, max_kv_tokens: 1048576, inflight: 2, age_ms: 100}}
Fields: healthy, running, waiting, waiting_uncached_tokens, used_kv_tokens, total_kv_tokens,
max_kv_tokens, max_running, inflight, age_ms, all optional. Engines not listed
are healthy with unknown load.

Exit status: 0 a selection was made, 1 routing failed (or the config is
invalid), 2 usage error.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "config", Usage: "config `FILE` (repeat for several files, which unify)"},
			&cli.StringFlag{Name: "model", Usage: "model `NAME`; may be omitted when the config serves one model"},
			&cli.Int64Flag{Name: "input-tokens", Usage: "prompt length in `TOKENS` (required)"},
			&cli.Int64Flag{Name: "max-tokens", Usage: "requested output budget in `TOKENS`; omitted means unknown"},
			&cli.StringFlag{Name: "session-id", Usage: "session key passed to the policies"},
			&cli.StringFlag{Name: "routing-key", Usage: "routing key passed to the policies"},
			&cli.StringFlag{Name: "load", Usage: "load fixture `FILE` (YAML or JSON)"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed for random choices, to make them repeatable"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of text"},
			&cli.StringFlag{Name: "router", Usage: "explain against a running router's live state at `URL` (POST /admin/explain)"},
			&cli.StringFlag{Name: "token", Usage: "admin bearer token for --router", EnvVars: []string{"ROUTER_ADMIN_TOKEN"}},
		},
		Action: runExplain,
	}
}

func runExplain(c *cli.Context) error {
	files := c.StringSlice("config")
	remote := c.String("router")
	switch {
	case c.NArg() > 0:
		return usageError("explain takes no arguments; pass config files with --config FILE")
	case remote != "" && (len(files) > 0 || c.IsSet("load") || c.IsSet("seed")):
		return usageError("--router explains against a running router's live state; it takes no --config, --load or --seed")
	case remote == "" && len(files) == 0:
		return usageError("explain needs a config (--config FILE) or a running router (--router URL)")
	case !c.IsSet("input-tokens"):
		return usageError("explain needs the prompt length: --input-tokens N")
	case c.Int64("input-tokens") < 0:
		return usageError("--input-tokens must not be negative")
	case c.IsSet("max-tokens") && c.Int64("max-tokens") < 0:
		return usageError("--max-tokens must not be negative")
	}
	var (
		x   *explain.Explanation
		err error
	)
	if remote != "" {
		x, err = explainRemote(c, remote)
	} else {
		x, err = explainLocal(c, files)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := x.WriteJSON(c.App.Writer); err != nil {
			return err
		}
	} else {
		x.WriteText(c.App.Writer)
	}
	if x.Error != nil {
		return cli.Exit(fmt.Sprintf("routing failed: %d %s", x.Error.Status, x.Error.Code), exitFailure)
	}
	return nil
}

// explainLocal runs the serving selection code against the config and a load fixture.
func explainLocal(c *cli.Context, files []string) (*explain.Explanation, error) {
	p, err := compiler.Compile(files)
	if err != nil {
		return nil, err
	}
	m, err := explainModel(p, c.String("model"))
	if err != nil {
		return nil, err
	}

	// One instant for the whole explanation: fixture ages and freshness checks agree.
	now := time.Now()
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		return nil, err
	}
	table := load.NewTable(p.Engines, func() time.Time { return now })
	if path := c.String("load"); path != "" {
		fx, err := fixture.Read(path)
		if err != nil {
			return nil, err
		}
		if err := fx.Apply(reg, table, now); err != nil {
			return nil, err
		}
	}
	var rnd policy.Rand
	if c.IsSet("seed") {
		rnd = policy.NewSeededRand(c.Uint64("seed"))
	}
	// Shared state as serving builds it, but nothing feeds it: the prefix index stays
	// empty (explain has no prompt to hash anyway) and a dry run writes no binding.
	deps, err := policy.NewDeps(p, table, rnd, func() time.Time { return now })
	if err != nil {
		return nil, err
	}
	resolver, err := bucket.NewResolver(*m, reg, deps)
	if err != nil {
		return nil, err
	}

	facts := &policy.Facts{
		Model:       m.Name,
		InputTokens: c.Int64("input-tokens"),
		SessionKey:  c.String("session-id"),
		RoutingKey:  c.String("routing-key"),
	}
	trace := &decision.Trace{}
	var sel bucket.Selection
	if c.IsSet("max-tokens") {
		facts.ExpectedPeak, err = bucket.ExpectedPeak(facts.InputTokens, c.Int64("max-tokens"))
		facts.PeakKnown = err == nil
	}
	if err == nil {
		// A dry run: explaining a request must not bind its session or routing key.
		sel, err = resolver.Route(policy.WithDryRun(decision.NewContext(c.Context, trace)), facts)
	}

	return explain.New(facts, trace, sel, err, reg, table, now), nil
}

// explainModel returns the named model, or the only one when name is empty.
func explainModel(p *plan.Plan, name string) (*plan.Model, error) {
	names := make([]string, len(p.Models))
	for i, m := range p.Models {
		names[i] = m.Name
	}
	if name == "" {
		if len(p.Models) == 1 {
			return &p.Models[0], nil
		}
		return nil, usageError("the config serves %d models; choose one with --model (%s)", len(p.Models), strings.Join(names, ", "))
	}
	if m := p.Model(name); m != nil {
		return m, nil
	}
	return nil, cli.Exit(fmt.Sprintf("model %q is not configured (serving would answer 404); configured: %s",
		name, strings.Join(names, ", ")), exitFailure)
}
