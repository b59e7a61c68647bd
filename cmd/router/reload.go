package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/runtime/control"
)

func reloadCommand() *cli.Command {
	return &cli.Command{
		Name:  "reload",
		Usage: "make a running router reload its configuration files",
		Description: `Sends POST /admin/reload to the router named by --router, which compiles the
files it was started with again and swaps the plan in: requests in flight finish on
the old plan, engines that stay keep their state. Prints what changed and exits 0, or
prints every error of a refused configuration and exits 1; the running plan then
stays. Run router validate on the files first. SIGHUP to router serve does the same.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "router", Value: "http://127.0.0.1:30000", Usage: "the router's base `URL` (or HOST:PORT)"},
			&cli.StringFlag{Name: "token", Usage: "admin bearer `TOKEN`, when the router sets admin_token", EnvVars: []string{"ROUTER_ADMIN_TOKEN"}},
		},
		Action: reload,
	}
}

func reload(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("reload takes no arguments; name the router with --router URL")
	}
	base, err := routerURL(c.String("router"))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(c.Context, http.MethodPost, base+"/admin/reload", nil)
	if err != nil {
		return usageError("--router %q: %v", base, err)
	}
	if tok := c.String("token"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return cli.Exit(fmt.Sprintf("reloading %s: %v", base, err), exitFailure)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return cli.Exit(fmt.Sprintf("reloading %s: %v", base, err), exitFailure)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error  struct{ Message string } `json:"error"`
			Errors []string                 `json:"errors"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
			if len(e.Errors) > 0 {
				msg = "reload refused, the running plan stays:\n  " + strings.Join(e.Errors, "\n  ")
			}
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (pass --token or set ROUTER_ADMIN_TOKEN)"
		}
		return cli.Exit(fmt.Sprintf("%s: %s", resp.Status, msg), exitFailure)
	}
	var res control.ReloadResult
	if err := json.Unmarshal(data, &res); err != nil {
		return cli.Exit(fmt.Sprintf("reloading %s: malformed answer: %v", base, err), exitFailure)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "reloaded: generation %d\n", res.Generation)
	for _, l := range []struct {
		name string
		ids  []string
	}{{"added", res.Added}, {"replaced", res.Replaced}, {"removed", res.Removed}, {"kept", res.Kept}, {"dropped", res.Dropped}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(w, "  %-9s %s\n", l.name+":", strings.Join(l.ids, ", "))
		}
	}
	return nil
}
