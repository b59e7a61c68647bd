package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/routerkit/router/runtime/token"
)

// codePromptTooLarge answers a request whose text to tokenize is over
// limits.max_tokenize_bytes.
const codePromptTooLarge = "prompt_too_large"

// meter bounds the tokenization of r: limits.max_tokenize_bytes of text in all, and none
// once r's context ends (the client left, or the hard stop).
func (s *Server) meter(r *http.Request) *token.Meter {
	return token.NewMeter(r.Context(), s.plan.Limits.MaxTokenizeBytes)
}

// tokenizeFailed is the answer to a request whose tokenization under s.meter(r) failed
// with err: 413 over the budget, naming the setting that raises it; the end of the
// request (the client left, or the router's hard stop); otherwise a 400, its message
// prefixed with what failed when what is not empty.
func tokenizeFailed(r *http.Request, err error, what string) *httpError {
	var tl *token.TooLargeError
	switch {
	case errors.As(err, &tl):
		return &httpError{status: http.StatusRequestEntityTooLarge, code: codePromptTooLarge,
			msg: fmt.Sprintf("%v: shorten the prompt, or raise limits.max_tokenize_bytes in the router's configuration", tl)}
	case errors.Is(context.Cause(r.Context()), errHardStop):
		return &httpError{status: http.StatusServiceUnavailable, code: codeDraining, msg: "the router is shutting down"}
	case r.Context().Err() != nil:
		return &httpError{status: statusClientClosed, code: codeClientClosed, msg: "client closed the request"}
	}
	if what == "" {
		return badRequest("%v", err)
	}
	return badRequest("%s: %v", what, err)
}
