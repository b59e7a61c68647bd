package main

import (
	"errors"
	"math"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler/legacy"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "migrate",
		Usage:     "turn an sgl-router command line (and its bucket file) into a configuration",
		ArgsUsage: "-- [PROGRAM] LEGACY-FLAGS...",
		Description: `Translates the sgl-router flags after -- into a CUE configuration with a
comment on every value naming the flag it came from. The line may start with its
program (python -m sglang_router.launch_router, smg [launch], sgl-model-gateway,
./target/release/sgl-model-gateway, cargo run ... --, sgl-router): the classic
router's (and SMG's) and the experimental router's flags and defaults differ, and the
header of the output says whose defaults were used; --from chooses when the line does
not say. Flags of a Python launcher may be abbreviated as its argparse allowed.
A line without --model-id takes the model's name from --model-path, or from
migrate's own --model-id NAME. Plain workers are given with
--worker-urls URL..., prefill/decode workers with --prefill URL [BOOTSTRAP_PORT|none]
and --decode URL. A legacy --bucket-config file (here or among the legacy flags)
becomes buckets; its prefill and decode buckets are joined only by explicit
--pair PREFILL_BUCKET=DECODE_BUCKET arguments.

sgl-router checked each engine's reported capacity before power_of_two,
session_aware, cache_aware and decode picks, against the engine's own limits.
Admission caps are absolute, so give those limits with --engine-max-running-requests
and --engine-max-kv-tokens to keep that check; without them the header of the output
says the check is not kept.

--policy cache_aware gets the approximate prefix index, learned from the router's own
dispatches as sgl-router's radix tree was, unless --engines-publish-kv-events says
every engine publishes KV events: then it gets the local index those events feed.

The output always passes 'router validate'. Options the target design dropped,
unknown flags and settings the configuration cannot express are rejected with
exit status 2, every problem listed; nothing is silently dropped. With -o the
configuration is written to a .cue file, replaced atomically.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "bucket-config", Usage: "translate the legacy bucket JSON in `FILE`"},
			&cli.StringSliceFlag{Name: "pair", Usage: "join prefill bucket P and decode bucket D into one bucket: `P=D` (repeatable)"},
			&cli.StringFlag{Name: "engine-max-running-requests", Usage: "keep sgl-router's capacity check with the engines' max running requests `N` as admission.max_running_requests"},
			&cli.StringFlag{Name: "engine-max-kv-tokens", Usage: "keep sgl-router's capacity check with the engines' KV capacity of `N` tokens (max_total_num_tokens) as admission.max_kv_tokens"},
			&cli.BoolFlag{Name: "engines-publish-kv-events", Usage: "the engines publish KV events: give --policy cache_aware the local prefix index they feed instead of the approximate one"},
			&cli.StringFlag{Name: "from", Usage: "read the command line as the `ROUTER` it came from: classic (python -m sglang_router.launch_router, sglang-router 0.3.x) or experimental (sglang's experimental/sgl-router); default: detected from the program name and the flags"},
			&cli.StringFlag{Name: "model-id", Usage: "serve the model as `NAME`, for command lines without --model-id (the classic router has none; its --model-path is used otherwise)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the configuration to `FILE` (.cue) instead of stdout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageError("migrate needs the sgl-router flags after --: router migrate [--bucket-config FILE] [--pair P=D]... [--engine-max-running-requests N] [--engine-max-kv-tokens N] [--engines-publish-kv-events] [--from classic|experimental] [--model-id NAME] [-o FILE] -- [python -m sglang_router.launch_router] --worker-urls URL...")
			}
			out := c.String("output")
			if out != "" && filepath.Ext(out) != ".cue" {
				return usageError("-o %s: migrate writes CUE, so name the file .cue", out)
			}
			in := legacy.Input{
				Args:         c.Args().Slice(),
				BucketConfig: c.String("bucket-config"),
				Pairs:        c.StringSlice("pair"),

				EnginesPublishKVEvents: c.Bool("engines-publish-kv-events"),
				From:                   legacy.Dialect(c.String("from")),
				ModelID:                c.String("model-id"),
			}
			if f := c.String("from"); f != "" && f != string(legacy.DialectClassic) && f != string(legacy.DialectExperimental) {
				return usageError("--from %s: give classic (python -m sglang_router.launch_router) or experimental (experimental/sgl-router)", f)
			}
			if c.IsSet("model-id") && in.ModelID == "" {
				return usageError("--model-id must not be empty: give the name clients send as \"model\"")
			}
			for _, f := range []struct {
				name string
				dst  **int64
			}{{"engine-max-running-requests", &in.EngineMaxRunningRequests}, {"engine-max-kv-tokens", &in.EngineMaxKVTokens}} {
				if !c.IsSet(f.name) {
					continue
				}
				// Decimal only: the flag package would read 010 as octal.
				n, err := strconv.ParseInt(c.String(f.name), 10, 64)
				if err != nil {
					return usageError("--%s %q: not a decimal integer of at most %d", f.name, c.String(f.name), int64(math.MaxInt64))
				}
				*f.dst = &n
			}
			src, _, err := legacy.Migrate(in)
			var rejected legacy.Errors
			if errors.As(err, &rejected) {
				return usageError("cannot migrate: %v", rejected)
			}
			if err != nil {
				return err
			}
			if out != "" {
				return writeFileAtomic(out, src)
			}
			_, err = c.App.Writer.Write(src)
			return err
		},
	}
}
