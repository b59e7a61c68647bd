package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/strictjson"
)

// prefillStatus is the prefill half's status, set once: nil once the prefill engine
// answered 2xx, else its failure.
type prefillStatus struct {
	once sync.Once
	done chan struct{}
	err  *Error
	// logprobs are the prefill answer's input_token_logprobs, for a request whose
	// answer gets them merged (see pd_logprobs.go); read once done is closed.
	logprobs json.RawMessage
}

func newPrefillStatus() *prefillStatus { return &prefillStatus{done: make(chan struct{})} }

// set records the status and reports whether this call was the one that set it.
func (p *prefillStatus) set(err *Error) (won bool) { return p.settle(err, nil) }

// settle records the status with the prefill answer's logprobs.
func (p *prefillStatus) settle(err *Error, logprobs json.RawMessage) (won bool) {
	p.once.Do(func() { p.err, p.logprobs, won = err, logprobs, true; close(p.done) })
	return won
}

// wait returns the prefill's failure once its status is known, or ctx's cause.
func (p *prefillStatus) wait(ctx context.Context) error {
	select {
	case <-p.done:
		if p.err != nil {
			return p.err
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// known returns the prefill's failure if its status is already known.
func (p *prefillStatus) known() *Error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// errDecodeDone cancels a prefill still running when the decode half has ended.
var errDecodeDone = errors.New("decode finished")

// dispatchPD sends the request to the selected prefill and decode engines at once, as
// SGLang's PD router does: both get the same body with the prefill engine's bootstrap
// address and a fresh bootstrap room, and the client gets the decode engine's response.
//
// The decode response is held until the prefill engine's status is known, and no longer
// than timeouts.prefill_status_ms: a prefill that never answers is a 504, a prefill that
// fails is its error, and a prefill that fails later cancels the decode half, which ends
// the stream with an error event. When the decode half ends, a prefill still running is
// cancelled. Both engines' breakers were acquired by the caller; both in-flight counts
// are released on every path. The returned failure, when both halves failed, prefers a
// 4xx rejection (the request is wrong; no retry helps) and then the prefill's failure,
// which usually caused the decode's.
func (dp *Dispatcher) dispatchPD(out Writer, r *http.Request, p *request.Prepared, sel bucket.Selection) *Error {
	pre, dec := sel.Prefill.Engine, sel.Decode.Engine
	body, err := withBootstrap(p.Body, pre, rand.Uint64()&(1<<63-1), p.Batch)
	if err != nil {
		return &Error{Kind: Malformed, Stage: plan.RolePrefill, Worker: pre, Detail: err.Error()}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	status := newPrefillStatus()
	deadline := time.AfterFunc(dp.timeouts.PrefillStatus, func() {
		e := &Error{Kind: Timeout, Stage: plan.RolePrefill, Worker: pre, Phase: PhasePrefillStatus, After: dp.timeouts.PrefillStatus}
		if status.set(e) {
			cancel(e)
		}
	})
	defer deadline.Stop()
	preGuard := dp.table.Acquire(pre)
	prefillDone := make(chan struct{})
	go func() {
		defer close(prefillDone)
		defer preGuard.Release()
		dp.prefill(ctx, cancel, pre, r, out.ID(), body, status, p.ReturnLogprob)
	}()
	decErr := dp.forward(ctx, out, r, body, dec, plan.RoleDecode, status)
	cancel(errDecodeDone)
	<-prefillDone
	if decErr == nil {
		return nil
	}
	preErr := status.known()
	failed := decErr
	if !decErr.Rejection() && preErr != nil && (preErr.Rejection() || decErr.Kind != ClientGone) {
		failed = preErr
	}
	cp := *failed
	cp.sent = true // both halves were dispatched: never retried
	return &cp
}

// prefill posts body to the prefill engine and drains its answer, which the client never
// sees; a non-2xx status is a failure. The status is reported as soon as it is known; a
// failure, then or while the answer drains, cancels the whole PD request with itself as
// the cause. With logprobs, the answer is read whole (up to maxResponseBytes) before the
// status is reported, with its input_token_logprobs for the decode answer.
func (dp *Dispatcher) prefill(ctx context.Context, cancel context.CancelCauseFunc, w *engine.Worker, in *http.Request, reqID string, body payload, status *prefillStatus, logprobs bool) {
	a := &attempt{dp: dp, w: w, Stage: plan.RolePrefill}
	fail := func(e *Error) {
		if errors.Is(context.Cause(ctx), errDecodeDone) {
			a.verdict(&Error{Kind: ClientGone}) // the decode half ended first: no verdict
			return
		}
		a.verdict(e)
		if status.set(e) || status.known() == nil {
			cancel(e)
		}
	}
	// The deadline only cancels; this goroutine alone reports the outcome, reading the
	// timeout back as the context's cause.
	total := time.AfterFunc(dp.timeouts.Total, func() {
		cancel(&Error{Kind: Timeout, Stage: plan.RolePrefill, Worker: w, Phase: PhaseTotal, After: dp.timeouts.Total})
	})
	defer total.Stop()
	req, err := dp.engineRequest(ctx, in, reqID, w, body)
	if err != nil {
		fail(&Error{Kind: Malformed, Stage: plan.RolePrefill, Worker: w, Detail: err.Error()})
		return
	}
	resp, err := dp.client.Do(req)
	if err != nil {
		e := classify(ctx, in.Context(), err, w, plan.RolePrefill)
		if e.Kind == Timeout && e.Phase == PhaseConnect {
			e.After = dp.timeouts.Connect
		}
		fail(e)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		fail(statusFailure(w, plan.RolePrefill, in.URL.Path, resp.StatusCode, raw))
		return
	}
	if logprobs {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		if err != nil {
			fail(classify(ctx, in.Context(), err, w, plan.RolePrefill))
			return
		}
		status.settle(nil, prefillAnswerLogprobs(raw))
	}
	status.set(nil)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		fail(classify(ctx, in.Context(), err, w, plan.RolePrefill))
		return
	}
	a.verdict(nil)
}

// engineRequest is the POST of body to engine w on the client's path and query, with the
// header set every half of a request gets (the header policy, the request id,
// forwarding): the URL and headers the proxy sends a plain engine or a decode half.
func (dp *Dispatcher) engineRequest(ctx context.Context, in *http.Request, reqID string, w *engine.Worker, body payload) (*http.Request, error) {
	target := w.Target()
	u := *target
	u.Path, u.RawPath = joinURLPath(target, in.URL)
	u.RawQuery = engineQuery(target, in.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body.reader())
	if err != nil {
		return nil, err
	}
	req.ContentLength, req.GetBody = body.len(), func() (io.ReadCloser, error) { return body.reader(), nil }
	req.Header = dp.headers.Outbound(in.Header, reqID)
	setForwarded(req.Header, in, make([]string, 3))
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "") // as the proxy does: no Go default in its place
	}
	if dp.Outbound != nil {
		req = dp.Outbound(req, w)
	}
	return req, nil
}

// statusFailure is an engine's non-2xx answer raw, to a request on the client's route, as
// a dispatch failure: a rejection (4xx) keeps the engine's own message for the client,
// anything else (a 4xx that is the engine's fault included) only the router's.
func statusFailure(w *engine.Worker, stage plan.Role, route string, status int, raw []byte) *Error {
	e := &Error{Kind: BadStatus, Stage: stage, Worker: w, Status: status, Detail: logline.Clip(string(raw), logline.MaxErrorText),
		engineFault: engineFault(route, status)}
	if status/100 == 3 {
		e.Kind = Malformed
	}
	if e.Rejection() {
		e.EngineMsg, e.Detail = logline.Clip(engineMessage(raw), 512), ""
	}
	return e
}

// withBootstrap returns body with bootstrap_host, bootstrap_port and bootstrap_room set
// for the prefill engine, arrays with one entry and one room per prompt for a batch of
// batch prompts, as SGLang's PD router sends them. When the client sent none of them
// (bootstrapFree), the fields are appended after the body's last member without copying
// it; otherwise the body is rebuilt with the client's values overwritten, keys sorted.
func withBootstrap(body []byte, pre *engine.Worker, room uint64, batch int) (payload, error) {
	bootstrapFree := !strictjson.TopLevelKey(body, func(k []byte) bool { return bytes.HasPrefix(k, []byte("bootstrap_")) })
	u, err := url.Parse(pre.URL())
	if err != nil {
		return payload{}, fmt.Errorf("adding bootstrap fields: prefill url: %w", err)
	}
	host, _ := json.Marshal(u.Hostname())
	hosts, ports, rooms := string(host), strconv.Itoa(pre.BootstrapPort()), strconv.FormatUint(room, 10)
	if batch > 0 {
		hs, ps, rs := make([]string, batch), make([]string, batch), make([]string, batch)
		for i := range batch {
			hs[i], ps[i], rs[i] = hosts, ports, strconv.FormatUint((room+uint64(i))&(1<<63-1), 10)
		}
		hosts, ports, rooms = "["+strings.Join(hs, ",")+"]", "["+strings.Join(ps, ",")+"]", "["+strings.Join(rs, ",")+"]"
	}
	fields := `"bootstrap_host":` + hosts + `,"bootstrap_port":` + ports + `,"bootstrap_room":` + rooms + "}"
	if end := bytes.LastIndexByte(body, '}'); bootstrapFree && end >= 0 {
		sep := ","
		if bytes.TrimSpace(body[:end])[len(bytes.TrimSpace(body[:end]))-1] == '{' {
			sep = ""
		}
		return payload{head: body[:end], tail: []byte(sep + fields)}, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return payload{}, fmt.Errorf("adding bootstrap fields: %w", err)
	}
	var extra map[string]json.RawMessage
	_ = json.Unmarshal([]byte("{"+fields), &extra)
	for k, v := range extra {
		all[k] = v
	}
	out, err := request.EncodeFields(all)
	if err != nil {
		return payload{}, fmt.Errorf("adding bootstrap fields: %w", err)
	}
	return payload{head: out}, nil
}
