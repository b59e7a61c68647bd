package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a configuration and report every error with its position",
		ArgsUsage: "FILE... (- reads standard input)",
		Description: `Compiles the files (CUE, YAML or JSON; several files unify into one
configuration) and prints one summary line per model. Errors go to stderr as
file:line:col: path: message: every schema-level problem at once, then the
cross-reference problems once those are fixed. A FILE of - reads standard input,
YAML (or JSON) unless --stdin-format says cue; its errors are reported as
stdin.yaml:line:col. Exit status: 0 valid, 1 invalid, 2 usage error.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "stdin-format", Value: "yaml", Usage: "the format of a config read from - : `yaml`, json or cue"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageError("validate needs at least one config file: router validate FILE... (- for standard input)")
			}
			srcs, err := readSources(c, c.Args().Slice())
			if err != nil {
				return err
			}
			p, err := compiler.CompileSources(srcs)
			if err != nil {
				return err
			}
			for _, m := range p.Models {
				fmt.Fprintln(c.App.Writer, summary(p, &m))
			}
			return nil
		},
	}
}

// readSources reads the config files, "-" being standard input in --stdin-format. The
// input is named stdin.EXT because the compiler picks a file's format by its extension.
func readSources(c *cli.Context, files []string) ([]compiler.Source, error) {
	format := c.String("stdin-format")
	if format != "yaml" && format != "json" && format != "cue" {
		return nil, usageError("--stdin-format must be yaml, json or cue, got %q", format)
	}
	srcs := make([]compiler.Source, len(files))
	stdin := false
	for i, name := range files {
		var data []byte
		var err error
		if name == "-" {
			if stdin {
				return nil, usageError("- is given twice: standard input can be read once")
			}
			stdin = true
			name = "stdin." + format
			data, err = io.ReadAll(c.App.Reader)
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
		srcs[i] = compiler.Source{Name: name, Data: data}
	}
	return srcs, nil
}

// summary describes a model in one line: its buckets in configuration order and the
// engines that serve it.
func summary(p *plan.Plan, m *plan.Model) string {
	ids := make([]string, len(m.Buckets))
	for i, b := range m.Buckets {
		ids[i] = b.ID
	}
	counts := map[plan.Role]int{}
	for _, e := range p.Engines {
		if e.Model == m.Name {
			counts[e.Role]++
		}
	}
	plain := false
	var dns []string
	for _, s := range p.EnginesFromDNS {
		if s.Model == m.Name {
			plain = plain || s.Role == plan.RolePlain
			dns = append(dns, fmt.Sprintf("%s from DNS %s", s.Role, s.ID))
		}
	}
	engines := fmt.Sprintf("%d plain engines", counts[plan.RolePlain])
	if counts[plan.RolePlain] == 0 && !plain {
		engines = fmt.Sprintf("%d prefill + %d decode engines", counts[plan.RolePrefill], counts[plan.RoleDecode])
	}
	if len(dns) > 0 {
		engines += " + " + strings.Join(dns, ", ")
	}
	return fmt.Sprintf("model %s: ok, %d buckets (%s), %s", m.Name, len(m.Buckets), strings.Join(ids, ", "), engines)
}
