package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/runtime/explain"
)

// explainRemote asks a running router to explain the request against its live state:
// health, load reports, in-flight counts and bindings as they are now. Nothing is
// dispatched and no binding is written.
func explainRemote(c *cli.Context, router string, req explain.Request) (*explain.Explanation, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	url := strings.TrimRight(router, "/") + "/admin/explain"
	hreq, err := http.NewRequestWithContext(c.Context, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, usageError("--router %q: %v", router, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if tok := c.String("token"); tok != "" {
		hreq.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("explaining at %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("explaining at %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return nil, fmt.Errorf("explaining at %s: %s: %s", url, resp.Status, msg)
	}
	var x explain.Explanation
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, fmt.Errorf("explaining at %s: malformed answer: %w", url, err)
	}
	return &x, nil
}
