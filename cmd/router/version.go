package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// versionCommand prints what `router --version` prints, for scripts and bug reports that
// expect a subcommand.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the router's module version and the VCS revision it was built from",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("version takes no arguments")
			}
			_, err := fmt.Fprintln(c.App.Writer, versionLine())
			return err
		},
	}
}

// versionLine describes the binary from its embedded build information: the module
// version (a tag for `go install ...@v1.2.3`, "(devel)" for a checkout), and the VCS
// revision, commit time and whether the tree had uncommitted changes, which `go build`
// records in a git checkout. A binary built without that information says so rather than
// inventing a version.
func versionLine() string {
	version, revision, when, dirty := "unknown", "unknown", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	line := fmt.Sprintf("router %s, revision %s", version, revision)
	if when != "" {
		line += " (" + when + ")"
	}
	if dirty {
		line += ", with uncommitted changes"
	}
	return line
}
