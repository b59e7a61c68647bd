package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
)

// Exit codes. Only main calls os.Exit; everything else returns one of these through Main.
const (
	exitOK      = 0
	exitFailure = 1 // invalid input or runtime failure
	exitUsage   = 2 // the command line itself is wrong
)

// --version prints the same line as `router version`, without urfave's "router version"
// prefix. VersionPrinter is urfave/cli's package variable, so it is set once.
func init() {
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, c.App.Version) }
}

// newApp builds the command tree. Each command lives in its own file.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "router",
		Usage:                "engine-selection router for LLM inference fleets",
		Version:              versionLine(),
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		Suggest:              true,
		// Main decides the exit code; urfave/cli must not call os.Exit itself.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
		Commands: []*cli.Command{
			validateCommand(),
			compileCommand(),
			schemaCommand(),
			migrateCommand(),
			explainCommand(),
			serveCommand(),
			reloadCommand(),
			simCommand(),
			topCommand(),
			versionCommand(),
			completionCommand(),
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = onUsageError
	}
	return app
}

// onUsageError turns a flag parsing failure into exit status 2.
func onUsageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(err.Error(), exitUsage)
}

// Main runs the router command line and returns the process exit code. It is the one
// place that prints errors: configuration errors one per line as file:line:col: message,
// anything else prefixed with "router: ".
func Main(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	exitCode := exitOK
	app.CommandNotFound = func(c *cli.Context, name string) {
		fmt.Fprintf(stderr, "router: unknown command %q: run 'router help' for the list\n", name)
		exitCode = exitUsage
	}
	err := app.Run(args)
	if err == nil {
		return exitCode
	}
	var cfgErrs compiler.Errors
	if errors.As(err, &cfgErrs) {
		for _, e := range cfgErrs {
			fmt.Fprintln(stderr, e)
		}
		return exitFailure
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(stderr, "router: %s\n", msg)
		}
		return coder.ExitCode()
	}
	fmt.Fprintf(stderr, "router: %s\n", err)
	return exitFailure
}

// usageError reports a wrong command line, with exit code 2.
func usageError(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitUsage)
}
