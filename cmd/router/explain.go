package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/selection"
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

With --ttft-slo-ms or --tps-slo, the request carries SLO targets: under the model's
slo preferences they order the compatible buckets, and explain shows each bucket's
estimate against them and the penalty that placed it.

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
			&cli.Int64Flag{Name: "input-tokens", Usage: "prompt length in `TOKENS` (or give the prompt with --text or --messages)"},
			&cli.StringFlag{Name: "text", Usage: "prompt `TEXT`, tokenized with the model's tokenizer as a completion prompt"},
			&cli.StringFlag{Name: "messages", Usage: "chat `FILE` (JSON: a messages array, or an object with messages, tools, chat_template_kwargs) rendered with the model's chat template and tokenized"},
			&cli.Int64Flag{Name: "max-tokens", Usage: "requested output budget in `TOKENS`; omitted means unknown"},
			&cli.Float64Flag{Name: "ttft-slo-ms", Usage: "the request's time-to-first-token target in `MS`, as header x-sgl-ttft-slo-ms gives it"},
			&cli.Float64Flag{Name: "tps-slo", Usage: "the request's decode throughput target in `TOKENS` per second, as header x-sgl-tps-slo gives it"},
			&cli.StringFlag{Name: "session-id", Usage: "session key passed to the policies"},
			&cli.StringFlag{Name: "routing-key", Usage: "routing key passed to the policies"},
			&cli.StringFlag{Name: "load", Usage: "load fixture `FILE` (YAML or JSON)"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed for random choices, to make them repeatable"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of text"},
			&cli.StringFlag{Name: "router", Usage: "explain against a running router's live state at `URL` or HOST:PORT (POST /admin/explain)"},
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
	case countSet(c, "input-tokens", "text", "messages") != 1:
		return usageError("explain needs the prompt one way: --input-tokens N, --text TEXT or --messages FILE")
	case c.Int64("input-tokens") < 0:
		return usageError("--input-tokens must not be negative")
	case c.IsSet("max-tokens") && c.Int64("max-tokens") < 0:
		return usageError("--max-tokens must not be negative")
	case c.IsSet("ttft-slo-ms") && !(c.Float64("ttft-slo-ms") > 0), c.IsSet("tps-slo") && !(c.Float64("tps-slo") > 0):
		return usageError("--ttft-slo-ms and --tps-slo must be greater than 0, as serving refuses such a header")
	}
	req, err := explainRequest(c)
	if err != nil {
		return err
	}
	var x *explain.Explanation
	if remote != "" {
		// HOST:PORT as `router serve` prints it, like `router top --router`.
		base, uerr := routerURL(remote)
		if uerr != nil {
			return uerr
		}
		x, err = explainRemote(c, base, req)
	} else {
		x, err = explainLocal(c, files, req)
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

// explainRequest is the request the flags describe, as a running router reads it.
func explainRequest(c *cli.Context) (explain.Request, error) {
	req := explain.Request{
		Model: c.String("model"), InputTokens: c.Int64("input-tokens"),
		SessionID: c.String("session-id"), RoutingKey: c.String("routing-key"),
		TTFTSLOMS: c.Float64("ttft-slo-ms"), TPSSLO: c.Float64("tps-slo"),
	}
	if c.IsSet("max-tokens") {
		mt := c.Int64("max-tokens")
		req.MaxTokens = &mt
	}
	if c.IsSet("text") {
		text := c.String("text")
		req.Text = &text
	}
	if path := c.String("messages"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return req, cli.Exit(fmt.Sprintf("--messages: %v", err), exitFailure)
		}
		if err := readChatFile(data, &req); err != nil {
			return req, cli.Exit(fmt.Sprintf("--messages %s: %v", path, err), exitFailure)
		}
	}
	return req, nil
}

// readChatFile reads a messages array, or a chat request object with messages and
// optionally tools and chat_template_kwargs, into req.
func readChatFile(data []byte, req *explain.Request) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		req.Messages = trimmed
		return nil
	}
	var chat struct {
		Messages           json.RawMessage `json:"messages"`
		Tools              json.RawMessage `json:"tools"`
		ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(trimmed, &chat); err != nil {
		return fmt.Errorf("not a JSON messages array or chat request: %w", err)
	}
	if len(chat.Messages) == 0 || string(chat.Messages) == "null" {
		return errors.New("no messages: give a JSON array of messages or an object with a messages array")
	}
	req.Messages, req.Tools, req.ChatTemplateKwargs = chat.Messages, chat.Tools, chat.ChatTemplateKwargs
	return nil
}

// countSet is how many of the named flags are set.
func countSet(c *cli.Context, names ...string) int {
	n := 0
	for _, name := range names {
		if c.IsSet(name) {
			n++
		}
	}
	return n
}

// explainLocal runs the serving selection code against the config and a load fixture.
func explainLocal(c *cli.Context, files []string, req explain.Request) (*explain.Explanation, error) {
	p, err := compiler.Compile(files)
	if err != nil {
		return nil, err
	}
	m, err := explainModel(p, req.Model)
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
	var fx *fixture.Fixture
	if path := c.String("load"); path != "" {
		fx, err = fixture.Read(path)
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
	// empty (explain has no prompt to hash anyway) and a dry run writes no binding. The
	// bindings are in memory even when the config shares them through a store: offline,
	// explain shows a fresh router, and `--router URL` shows a live one's bindings.
	p.Bindings = nil
	deps, err := policy.NewDeps(p, table, rnd, func() time.Time { return now })
	if err != nil {
		return nil, err
	}
	// The model's selection stack, built as serving builds it.
	sm, err := selection.NewModel(m, reg, deps)
	if err != nil {
		return nil, err
	}
	facts, tokenized, peakErr, err := req.Facts(nil, m.Name, sm.Tok)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	// The dry-run selection serving would run, explained (an overflowing budget like any
	// other selection failure).
	x := explain.Run(c.Context, sm, &facts, peakErr, deps, reg, table, now, tokenized)
	markUnset(x, fx)
	return x, nil
}

// markUnset shows the native load fields a fixture left out as unknown rather than the
// zero the load table holds for them: the operator did not say the engine has no KV
// capacity, only nothing about it.
func markUnset(x *explain.Explanation, fx *fixture.Fixture) {
	if fx == nil {
		return
	}
	for ai := range x.Attempts {
		for gi := range x.Attempts[ai].Groups {
			for _, c := range x.Attempts[ai].Groups[gi].Candidates {
				e, ok := fx.Engines[c.ID]
				if !ok || c.Load == nil || !c.Load.Native {
					continue
				}
				if e.WaitingUncachedTokens == nil {
					c.Load.WaitingUncachedTokens = nil
				}
				if e.UsedKVTokens == nil {
					c.Load.UsedKVTokens = nil
				}
				if e.MaxKVTokens == nil {
					c.Load.MaxKVTokens = nil
				}
				if e.MaxRunning == nil {
					c.Load.MaxRunning = nil
				}
			}
		}
	}
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
