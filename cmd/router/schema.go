package main

import (
	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/cue/schema"
)

func schemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "schema",
		Usage: "print the embedded CUE schema of a configuration",
		Action: func(c *cli.Context) error {
			_, err := c.App.Writer.Write(schema.Source)
			return err
		},
	}
}
