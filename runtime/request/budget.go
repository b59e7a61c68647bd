package request

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/routerkit/router/runtime/token"
)

// Meter bounds the tokenization of r: limits.max_tokenize_bytes of text in all (a
// batch's prompts together), and none once r's context ends (the client left, or the
// router's hard stop).
func (ms *Models) Meter(r *http.Request) *token.Meter {
	return token.NewMeter(r.Context(), ms.plan.Limits.MaxTokenizeBytes)
}

// Tokenizing types the failure err of a tokenization of r's text for model under
// ms.Meter(r): TooLarge over the budget, naming the setting that raises it; Ended when
// r's context ended, with its cause; otherwise Invalid, the message prefixed with what
// failed when what is not empty.
func Tokenizing(r *http.Request, err error, model, what string) *Error {
	if tl, ok := errors.AsType[*token.TooLargeError](err); ok {
		return &Error{Kind: TooLarge, Model: model,
			Msg: fmt.Sprintf("%v: shorten the prompt, or raise limits.max_tokenize_bytes in the router's configuration", tl)}
	}
	if r.Context().Err() != nil {
		return &Error{Kind: Ended, Model: model, Msg: "the request ended while its prompt was tokenized",
			Cause: context.Cause(r.Context())}
	}
	if what != "" {
		return &Error{Kind: Invalid, Model: model, Msg: what + ": " + err.Error()}
	}
	return &Error{Kind: Invalid, Model: model, Msg: err.Error()}
}
