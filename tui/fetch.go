package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// FetchFunc returns the router's current snapshot. The model calls it from a command,
// never from Update, so tests substitute a function that returns canned states.
type FetchFunc func(context.Context) (*State, error)

// fetchTimeout bounds one poll, so a router that accepts and never answers shows as
// disconnected instead of freezing the screen, and `router top --once` returns.
const fetchTimeout = 5 * time.Second

// bounded is one poll within fetchTimeout. A FetchFunc that returns neither a snapshot
// nor an error counts as malformed, so the views never see a nil State.
func (f FetchFunc) bounded(ctx context.Context) (*State, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	st, err := f(ctx)
	if err == nil && st == nil {
		err = fmt.Errorf("%w: the poll returned none", ErrMalformed)
	}
	return st, err
}

// Reasons a poll fails, for errors.Is; the error's text says the rest. ErrMalformed is the
// third.
var (
	ErrUnreachable  = errors.New("cannot reach")
	ErrUnauthorized = errors.New("401 unauthorized")
)

// maxSnapshot bounds how much of a response is read: a router with thousands of engines
// answers in a few MiB, and anything bigger is not a router.
const maxSnapshot = 32 << 20

// HTTPFetch returns a FetchFunc that GETs base+"/admin/state" with the admin token as a
// bearer token (none when token is empty). The context bounds each poll.
func HTTPFetch(client *http.Client, base, token string) FetchFunc {
	endpoint := strings.TrimSuffix(base, "/") + "/admin/state"
	return func(ctx context.Context) (*State, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return nil, fmt.Errorf("building request: %w", err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			// The *url.Error repeats the method and URL; name the router once instead.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("%w %s: %w", ErrUnreachable, base, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxSnapshot))
		if err != nil {
			return nil, fmt.Errorf("%w %s: reading the snapshot: %w", ErrUnreachable, base, err)
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized && token == "":
			return nil, fmt.Errorf("%w: the router requires an admin token", ErrUnauthorized)
		case resp.StatusCode == http.StatusUnauthorized:
			return nil, fmt.Errorf("%w: the router refused the admin token", ErrUnauthorized)
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("GET %s: %s%s", endpoint, clean(resp.Status), errorMessage(body))
		}
		st, err := Decode(body)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", endpoint, err)
		}
		return st, nil
	}
}

// errorMessage extracts the message of an OpenAI-shaped error body, which is what the
// router answers errors with, as ": message" cleaned of control characters, or "" for
// any other body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return ""
	}
	return ": " + clean(e.Error.Message)
}
