package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// decodeBody decodes a client's JSON body into v strictly (package strictjson): a key
// repeated in one object, or differing from a field the router reads only by case, is a
// 400, because the engine would read a different value than the router routed on.
func decodeBody(body []byte, v any) *httpError {
	err := strictjson.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var (
		typeErr *json.UnmarshalTypeError
		keyErr  *strictjson.KeyError
	)
	switch {
	case errors.As(err, &keyErr):
		return &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: keyErr.Error()}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: fmt.Sprintf("%s: expected %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)}
	}
	return &httpError{status: http.StatusBadRequest, code: codeInvalidJSON, msg: "request body is not a JSON object: " + err.Error()}
}

// messageShape is the keys token.Message reads: role, and content as a string or a list
// of parts with type and text.
type messageShape struct {
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func init() { strictjson.RegisterShape[token.Message, messageShape]() }
