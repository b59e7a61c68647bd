package main

import (
	"errors"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler/legacy"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "migrate",
		Usage:     "turn an sgl-router command line (and its bucket file) into a configuration",
		ArgsUsage: "-- LEGACY-FLAGS...",
		Description: `Translates the sgl-router flags after -- into a CUE configuration with a
comment on every value naming the flag it came from. Plain workers are given with
--worker-urls URL..., prefill/decode workers with --prefill URL [BOOTSTRAP_PORT|none]
and --decode URL. A legacy --bucket-config file (here or among the legacy flags)
becomes buckets; its prefill and decode buckets are joined only by explicit
--pair PREFILL_BUCKET=DECODE_BUCKET arguments.

The output always passes 'router validate'. Options the target design dropped,
unknown flags and settings the configuration cannot express are rejected with
exit status 2, every problem listed; nothing is silently dropped. With -o the
configuration is written to a .cue file, replaced atomically.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "bucket-config", Usage: "translate the legacy bucket JSON in `FILE`"},
			&cli.StringSliceFlag{Name: "pair", Usage: "join prefill bucket P and decode bucket D into one bucket: `P=D` (repeatable)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the configuration to `FILE` (.cue) instead of stdout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageError("migrate needs the sgl-router flags after --: router migrate [--bucket-config FILE] [--pair P=D]... [-o FILE] -- --model-id M --worker-urls URL...")
			}
			out := c.String("output")
			if out != "" && filepath.Ext(out) != ".cue" {
				return usageError("-o %s: migrate writes CUE, so name the file .cue", out)
			}
			src, _, err := legacy.Migrate(legacy.Input{
				Args:         c.Args().Slice(),
				BucketConfig: c.String("bucket-config"),
				Pairs:        c.StringSlice("pair"),
			})
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
