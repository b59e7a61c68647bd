package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a configuration and report every error with its position",
		ArgsUsage: "FILE...",
		Description: `Compiles the files (CUE, YAML or JSON; several files unify into one
configuration) and prints one summary line per model. Errors go to stderr as
file:line:col: path: message: every schema-level problem at once, then the
cross-reference problems once those are fixed. Exit status: 0 valid, 1 invalid,
2 usage error.`,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageError("validate needs at least one config file: router validate FILE...")
			}
			p, err := compiler.Compile(c.Args().Slice())
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
	engines := fmt.Sprintf("%d plain engines", counts[plan.RolePlain])
	if counts[plan.RolePlain] == 0 {
		engines = fmt.Sprintf("%d prefill + %d decode engines", counts[plan.RolePrefill], counts[plan.RoleDecode])
	}
	return fmt.Sprintf("model %s: ok, %d buckets (%s), %s", m.Name, len(m.Buckets), strings.Join(ids, ", "), engines)
}
