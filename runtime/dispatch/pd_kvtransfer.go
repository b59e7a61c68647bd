package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
)

// maxPrefillAnswer bounds the prefill half's answer the router reads for its
// kv_transfer_params: one generated token and the hand-over.
const maxPrefillAnswer = 1 << 20

// remoteDecode is what the prefill half of vLLM's disaggregation is asked for: run the
// prefill, keep the KV and hand it to a decode engine (NixlConnector's request; llm-d's
// routing sidecar, connector_nixlv2.go, sends the same).
var remoteDecode = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

// dispatchKVTransfer sends a PD request over vLLM's disaggregation protocol, as llm-d
// does: first the prefill half, asked for a remote decode with max_tokens 1 and no stream;
// then, once it answered, the decode half with the client's request and the
// kv_transfer_params the prefill returned. The client gets the decode answer, streamed or
// not. Unlike SGLang's protocol the halves run one after the other: the decode needs
// what the prefill returns. A prefill failure is the request's failure (4xx stays 4xx);
// once the prefill ran, nothing is retried.
func (dp *Dispatcher) dispatchKVTransfer(out Writer, r *http.Request, p *request.Prepared, sel bucket.Selection) *Error {
	pre, dec := sel.Prefill.Engine, sel.Decode.Engine
	preBody, err := prefillBody(p.Body)
	if err != nil {
		return &Error{Kind: Malformed, Stage: plan.RolePrefill, Worker: pre, Detail: err.Error()}
	}
	params, derr := dp.prefillForTransfer(r, out.ID(), pre, preBody)
	if derr != nil {
		if b := dec.Breaker(); b != nil {
			b.Abandon() // the decode engine was never asked
		}
		return derr
	}
	decBody, err := withFields(p.Body, map[string]json.RawMessage{"kv_transfer_params": params})
	if err != nil {
		return &Error{Kind: Malformed, Stage: plan.RoleDecode, Worker: dec, Detail: err.Error(), sent: true}
	}
	if derr := dp.forward(r.Context(), out, r, payload{head: decBody}, dec, plan.RoleDecode, nil); derr != nil {
		out := *derr
		out.sent = true // the prefill holds KV for this request: never retried
		return &out
	}
	return nil
}

// prefillBody is the client's body asking for the prefill half: kv_transfer_params for a
// remote decode, one output token, no stream, and no minimum output, which one token
// cannot meet (vLLM refuses min_tokens above max_tokens): as vLLM's own proxy sends it
// (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, send_request_to_service),
// the decode half keeps the client's minimum.
func prefillBody(body []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("preparing the prefill request: %w", err)
	}
	fields["kv_transfer_params"] = remoteDecode
	fields["stream"] = json.RawMessage("false")
	delete(fields, "stream_options")
	fields["max_tokens"] = json.RawMessage("1")
	if _, ok := fields["max_completion_tokens"]; ok {
		fields["max_completion_tokens"] = json.RawMessage("1") // vLLM prefers it to max_tokens
	}
	delete(fields, "min_tokens")
	delete(fields, "min_completion_tokens")
	return request.EncodeFields(fields)
}

// withFields returns body with fields set at its top level.
func withFields(body []byte, set map[string]json.RawMessage) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	for k, v := range set {
		fields[k] = v
	}
	return request.EncodeFields(fields)
}

// errNoTransfer is a prefill answer without the hand-over vLLM returns when the prefill
// stopped on its token cap, as it was asked to.
var errNoTransfer = errors.New("answered without kv_transfer_params: is the engine running vLLM with a KV connector (kv_transfer_config) as a producer?")

// prefillForTransfer posts body to the prefill engine within timeouts.prefill_status_ms
// and returns the kv_transfer_params of its answer.
func (dp *Dispatcher) prefillForTransfer(in *http.Request, reqID string, w *engine.Worker, body []byte) (json.RawMessage, *Error) {
	guard := dp.table.Acquire(w)
	defer guard.Release()
	a := &attempt{dp: dp, w: w, Stage: plan.RolePrefill}
	fail := func(e *Error) (json.RawMessage, *Error) {
		a.verdict(e)
		return nil, e
	}
	ctx, cancel := context.WithTimeoutCause(in.Context(), dp.timeouts.PrefillStatus,
		&Error{Kind: Timeout, Stage: plan.RolePrefill, Worker: w, Phase: PhasePrefillStatus, After: dp.timeouts.PrefillStatus})
	defer cancel()
	req, err := dp.engineRequest(ctx, in, reqID, w, payload{head: body})
	if err != nil {
		return fail(&Error{Kind: Malformed, Stage: plan.RolePrefill, Worker: w, Detail: err.Error()})
	}
	resp, err := dp.client.Do(req)
	if err != nil {
		return fail(classify(ctx, in.Context(), err, w, plan.RolePrefill))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxPrefillAnswer))
	if err != nil {
		return fail(classify(ctx, in.Context(), err, w, plan.RolePrefill))
	}
	if resp.StatusCode/100 != 2 {
		return fail(statusFailure(w, plan.RolePrefill, in.URL.Path, resp.StatusCode, raw))
	}
	var answer struct {
		KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || !request.Present(answer.KVTransferParams) {
		detail := errNoTransfer.Error()
		if err != nil {
			detail = "answered with a body that is not JSON: " + err.Error()
		}
		return fail(&Error{Kind: Malformed, Stage: plan.RolePrefill, Worker: w, Detail: detail})
	}
	a.verdict(nil)
	return answer.KVTransferParams, nil
}
