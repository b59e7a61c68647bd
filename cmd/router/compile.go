package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
)

func compileCommand() *cli.Command {
	return &cli.Command{
		Name:      "compile",
		Usage:     "print the compiled runtime plan (the effective config) as JSON",
		ArgsUsage: "FILE...",
		Description: `Compiles the files like validate and prints the plan that serve would run,
with every default filled in. With -o the plan is written to a file, replaced
atomically: a failed compile leaves an existing file untouched.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the plan to `FILE` instead of stdout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageError("compile needs at least one config file: router compile FILE...")
			}
			p, err := compiler.Compile(c.Args().Slice())
			if err != nil {
				return err
			}
			// The plan is for reading, never read back: the admin token and engine URL
			// credentials are secrets that would otherwise land in terminals, CI logs and
			// committed plan files.
			if p.AdminToken != "" {
				p.AdminToken = redacted
			}
			for i := range p.Engines {
				p.Engines[i].URL = plan.RedactURL(p.Engines[i].URL)
			}
			out, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				return fmt.Errorf("encoding plan: %w", err)
			}
			out = append(out, '\n')
			if name := c.String("output"); name != "" {
				return writeFileAtomic(name, out)
			}
			_, err = c.App.Writer.Write(out)
			return err
		},
	}
}

// redacted replaces secrets in printed plans.
const redacted = "(redacted)"

// writeFileAtomic writes data to a temporary file beside name and renames it into place,
// so a reader never sees half a file and a failure leaves the old one.
func writeFileAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
