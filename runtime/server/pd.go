package server

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

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
)

// prefillFailure cancels the decode half of a PD request when its prefill half fails.
type prefillFailure struct {
	engine string
	err    error
}

func (f *prefillFailure) Error() string {
	return fmt.Sprintf("prefill engine %s failed: %v", f.engine, f.err)
}

var errDecodeDone = errors.New("decode finished")

// dispatchPD sends the request to the selected prefill and decode engines at once, as
// SGLang's PD router does: both get the same body with the prefill engine's bootstrap
// address and a fresh bootstrap room, and the client gets the decode engine's response.
// The decode response is held until the prefill engine has answered, so a prefill
// failure is reported (502 prefill_error) instead of a decode's 200; a prefill that
// fails later cancels the decode half, which ends the stream with an error event. When
// the decode half ends, a prefill still running is cancelled. Both engines' in-flight
// counts are released on every path.
func (s *Server) dispatchPD(rw *recorder, r *http.Request, p *prepared, sel bucket.Selection) {
	pre, dec := sel.Prefill.Engine, sel.Decode.Engine
	body, err := withBootstrap(p.body, pre, rand.Uint64()&(1<<63-1), p.batch)
	if err != nil {
		writeError(rw, http.StatusInternalServerError, bucket.CodeInternal, err.Error())
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	preGuard := s.table.Acquire(pre)
	prefillDone := make(chan struct{})
	answered := make(chan error, 1)
	go func() {
		defer close(prefillDone)
		defer preGuard.Release()
		if err := s.prefill(ctx, pre, r, body, answered); err != nil && ctx.Err() == nil {
			cancel(&prefillFailure{engine: pre.ID(), err: err})
		}
	}()
	s.forward(r.WithContext(ctx), body, &dispatch{engine: dec, rec: rw, prefill: answered})
	cancel(errDecodeDone)
	<-prefillDone
}

// prefill posts body to the prefill engine and drains its answer, which the client never
// sees; a non-2xx status is a failure. answered receives the outcome as soon as the
// engine's status is known (the decode response waits for it).
func (s *Server) prefill(ctx context.Context, w *engine.Worker, in *http.Request, body []byte, answered chan<- error) (err error) {
	reported := false
	defer func() {
		if !reported {
			answered <- &prefillFailure{engine: w.ID(), err: err}
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL()+in.URL.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth := in.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, engineMessage(msg))
	}
	reported = true
	answered <- nil
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// withoutField returns body, a JSON object, without its top-level key; other fields keep
// their values and keys come out sorted.
func withoutField(body []byte, key string) ([]byte, *httpError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, &httpError{status: http.StatusBadRequest, code: codeInvalidJSON, msg: "request body is not a JSON object: " + err.Error()}
	}
	delete(fields, key)
	out, err := encodeFields(fields)
	if err != nil {
		return nil, &httpError{status: http.StatusInternalServerError, code: bucket.CodeInternal, msg: err.Error()}
	}
	return out, nil
}

// encodeFields encodes a JSON object without escaping <, > and &, so prompts reach the
// engine as the client wrote them.
func encodeFields(fields map[string]json.RawMessage) ([]byte, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// withBootstrap returns body with bootstrap_host, bootstrap_port and bootstrap_room set
// for the prefill engine (arrays of batch entries for a batch of prompts), overwriting
// whatever the client sent. Other fields keep their
// values; keys come out sorted.
func withBootstrap(body []byte, pre *engine.Worker, room uint64, batch int) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("adding bootstrap fields: %w", err)
	}
	u, err := url.Parse(pre.URL())
	if err != nil {
		return nil, fmt.Errorf("adding bootstrap fields: prefill url: %w", err)
	}
	host, port := any(u.Hostname()), any(pre.BootstrapPort())
	rooms := any(room)
	if batch > 0 {
		// A batch gets one bootstrap entry per prompt, each prompt its own room, as
		// SGLang's PD router sends them.
		hosts, ports, rs := make([]string, batch), make([]int, batch), make([]uint64, batch)
		for i := range batch {
			hosts[i], ports[i], rs[i] = u.Hostname(), pre.BootstrapPort(), (room+uint64(i))&(1<<63-1)
		}
		host, port, rooms = hosts, ports, rs
	}
	fields["bootstrap_host"], _ = json.Marshal(host)
	fields["bootstrap_port"], _ = json.Marshal(port)
	fields["bootstrap_room"], _ = json.Marshal(rooms)
	out, err := encodeFields(fields)
	if err != nil {
		return nil, fmt.Errorf("adding bootstrap fields: %w", err)
	}
	return out, nil
}
