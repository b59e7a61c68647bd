package dispatch

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/routerkit/router/runtime/request"
)

// A PD /generate asking for return_logprob gets its prompt's input_token_logprobs from
// both halves: the prefill engine computed them, the decode engine did not. SGLang's PD
// router (sgl-router/src/routers/http/pd_router.rs, merge_logprobs_in_json and
// merge_streaming_logprobs) waits for the prefill's answer and puts its
// meta_info.input_token_logprobs in front of the decode answer's, in a JSON answer and in
// every event of a stream; an answer without the list (a batch's array, a decode answer
// without meta_info) goes to the client as it is. The router does the same. One
// difference: SGLang's router parses a streamed prefill answer as one JSON document,
// which fails, so its streams go unmerged; here the prefill's list is read from its
// events as well.

// maxLogprobEvent bounds one stream event the merge holds; a longer one passes unmerged.
const maxLogprobEvent = 16 << 20

// prefillLogprobs is the prefill's input_token_logprobs for a decode attempt whose answer
// gets them merged, else nil. The prefill's status is known when it is called.
func (a *attempt) prefillLogprobs() json.RawMessage {
	if a.prefill == nil {
		return nil
	}
	return a.prefill.logprobs
}

// prefillAnswerLogprobs returns the input_token_logprobs of a prefill engine's answer, JSON or
// an event stream (the first event that has a non-empty list), or nil.
func prefillAnswerLogprobs(raw []byte) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		return inputLogprobs(raw)
	}
	for len(raw) > 0 {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte("\n"))
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
			if lp := inputLogprobs(bytes.TrimSpace(data)); len(lp) > 2 {
				return lp
			}
		}
	}
	return nil
}

// inputLogprobs is meta_info.input_token_logprobs of a JSON answer when it is an array.
func inputLogprobs(answer []byte) json.RawMessage {
	var a struct {
		MetaInfo struct {
			InputTokenLogprobs json.RawMessage `json:"input_token_logprobs"`
		} `json:"meta_info"`
	}
	if json.Unmarshal(answer, &a) != nil || !bytes.HasPrefix(a.MetaInfo.InputTokenLogprobs, []byte("[")) {
		return nil
	}
	return a.MetaInfo.InputTokenLogprobs
}

// mergeLogprobs returns the decode engine's JSON answer with pre in front of its
// meta_info.input_token_logprobs, or the answer unchanged when it has no such array.
func mergeLogprobs(answer []byte, pre json.RawMessage) []byte {
	var top, meta map[string]json.RawMessage
	if json.Unmarshal(answer, &top) != nil || json.Unmarshal(top["meta_info"], &meta) != nil {
		return answer
	}
	dec := bytes.TrimSpace(meta["input_token_logprobs"])
	if !bytes.HasPrefix(dec, []byte("[")) {
		return answer
	}
	meta["input_token_logprobs"] = concatArrays(bytes.TrimSpace(pre), dec)
	m, err := request.EncodeFields(meta)
	if err != nil {
		return answer
	}
	top["meta_info"] = m
	out, err := request.EncodeFields(top)
	if err != nil {
		return answer
	}
	return out
}

// concatArrays joins two JSON arrays' elements into one array.
func concatArrays(a, b []byte) []byte {
	switch {
	case len(bytes.TrimSpace(a[1:len(a)-1])) == 0:
		return b
	case len(bytes.TrimSpace(b[1:len(b)-1])) == 0:
		return a
	}
	out := make([]byte, 0, len(a)+len(b))
	out = append(out, a[:len(a)-1]...)
	out = append(out, ',')
	return append(out, b[1:]...)
}

// logprobEvents is a decode engine's event stream with the prefill's input logprobs
// merged into every event (see mergeLogprobs), event by event: it holds the bytes of one
// event until its blank line, at most maxLogprobEvent of them.
type logprobEvents struct {
	src     io.ReadCloser
	pre     json.RawMessage
	in, out []byte
	scanned int   // in[:scanned] holds no event end
	pass    bool  // the current event is oversized: it passes until its end
	err     error // the source's, once it returned one
	buf     [copyBufferSize]byte
}

func (l *logprobEvents) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		if i := bytes.Index(l.in[max(l.scanned-1, 0):], []byte("\n\n")); i >= 0 {
			end := max(l.scanned-1, 0) + i + 2
			if l.out = l.in[:end]; !l.pass {
				l.out = l.merged(l.out)
			}
			l.in, l.scanned, l.pass = l.in[end:], 0, false
			continue
		}
		l.scanned = len(l.in)
		if l.err != nil || len(l.in) > maxLogprobEvent {
			if len(l.in) == 0 {
				return 0, l.err
			}
			// An unfinished or oversized event passes as it is, its rest too.
			l.out, l.in, l.scanned, l.pass = l.in, nil, 0, true
			continue
		}
		n, err := l.src.Read(l.buf[:])
		l.in = append(l.in, l.buf[:n]...)
		l.err = err
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

// merged is one event with the prefill's logprobs merged into its data.
func (l *logprobEvents) merged(event []byte) []byte {
	data, ok := bytes.CutPrefix(event, []byte("data: "))
	if !ok || !bytes.HasPrefix(data, []byte("{")) {
		return event
	}
	data = bytes.TrimSpace(data)
	m := mergeLogprobs(data, l.pre)
	if &m[0] == &data[0] {
		return event
	}
	return append(append([]byte("data: "), m...), "\n\n"...)
}

func (l *logprobEvents) Close() error { return l.src.Close() }
