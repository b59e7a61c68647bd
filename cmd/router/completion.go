package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// The bash and zsh scripts ask the binary itself for candidates through urfave/cli's
// --generate-bash-completion, so they never fall behind the commands and flags; fish gets
// a static script generated from the command tree.

const bashCompletion = `# bash completion for router; load with: source <(router completion bash)
_router() {
	local cur words
	COMPREPLY=()
	cur="${COMP_WORDS[COMP_CWORD]}"
	words=("${COMP_WORDS[@]:0:COMP_CWORD}")
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)" -- "$cur"))
	else
		COMPREPLY=($(compgen -W "$("${words[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
	fi
}
complete -o bashdefault -o default -F _router router
`

const zshCompletion = `#compdef router
# zsh completion for router; load with: source <(router completion zsh)
_router() {
	local -a opts
	local cur="${words[-1]}"
	if [[ "$cur" == -* ]]; then
		opts=("${(@f)$(${words[@]:0:#words[@]-1} "$cur" --generate-bash-completion 2>/dev/null)}")
	else
		opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
	fi
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
if [[ "$(basename -- ${(%):-%x})" != "_router" ]]; then
	compdef _router router
fi
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `Prints the script for the shell named. Load it in the running shell with
  source <(router completion bash)       # or zsh
  router completion fish | source
or install it where the shell looks for completions, e.g.
  router completion bash > /etc/bash_completion.d/router
  router completion zsh > "${fpath[1]}/_router"
  router completion fish > ~/.config/fish/completions/router.fish`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("completion needs the shell: router completion bash|zsh|fish")
			}
			switch shell := c.Args().First(); shell {
			case "bash":
				_, err := io.WriteString(c.App.Writer, bashCompletion)
				return err
			case "zsh":
				_, err := io.WriteString(c.App.Writer, zshCompletion)
				return err
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return fmt.Errorf("generating the fish completion: %w", err)
				}
				_, err = io.WriteString(c.App.Writer, script)
				return err
			default:
				return usageError("completion: unknown shell %q: give bash, zsh or fish", shell)
			}
		},
	}
}
