package token

import (
	"context"
	"errors"
	"fmt"
)

// Meter bounds the tokenization of one request. Clients choose the text, and tokenizing
// it is the router's costliest work on a request (a real tokenizer runs at tens of MB/s
// at best), so it has a budget in bytes and stops when the request's context ends: a
// client that leaves takes its tokenization with it.
//
// One Meter serves every text of a request (a batch's prompts share the budget) and is
// used by one goroutine at a time. A nil *Meter bounds nothing: tools that tokenize
// their operator's own input (router explain, the simulator's engines) pass nil.
type Meter struct {
	ctx      context.Context
	maxBytes int64 // 0: no byte budget
	charged  int64 // bytes of text taken from the budget
	done     int64 // bytes tokenized so far
	check    int64 // done at which Work next looks at the context
}

// CheckEvery is how many bytes a tokenizer works through between two looks at the
// request's context. A look costs tens of nanoseconds and 64 KiB costs a real tokenizer
// a few milliseconds, so an abandoned request stops within milliseconds at no
// measurable cost.
const CheckEvery = 64 << 10

// NewMeter returns the meter of a request with context ctx that may tokenize at most
// maxBytes bytes of text in all (0: no byte budget).
func NewMeter(ctx context.Context, maxBytes int64) *Meter {
	return &Meter{ctx: ctx, maxBytes: maxBytes, check: CheckEvery}
}

// TooLargeError is the error of a request whose text to tokenize is over its budget.
type TooLargeError struct {
	// Limit is the budget in bytes, Size the bytes the request asked to tokenize by the
	// time it ran out (a batch's prompts count together).
	Limit, Size int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the text to tokenize is %d bytes, over the limit of %d bytes per request", e.Size, e.Limit)
}

// Charge takes n bytes of text to tokenize from the budget, before the work: a
// *TooLargeError when the request's texts come to more than the budget, the context's
// error when the request has ended.
func (m *Meter) Charge(n int) error {
	if m == nil {
		return nil
	}
	m.charged += int64(n)
	if m.maxBytes > 0 && m.charged > m.maxBytes {
		return &TooLargeError{Limit: m.maxBytes, Size: m.charged}
	}
	return m.ctx.Err()
}

// Work records n more bytes tokenized and, every CheckEvery bytes, returns the context's
// error once it has ended.
func (m *Meter) Work(n int) error {
	if m == nil {
		return nil
	}
	m.done += int64(n)
	if m.done < m.check {
		return nil
	}
	m.check = m.done + CheckEvery
	return m.ctx.Err()
}

// Err returns the context's error, for a long step that does not advance through bytes
// (merging one long pre-token) to look at now and then.
func (m *Meter) Err() error {
	if m == nil {
		return nil
	}
	return m.ctx.Err()
}

// Done returns the bytes tokenized so far.
func (m *Meter) Done() int64 {
	if m == nil {
		return 0
	}
	return m.done
}

// Stopped reports whether err is a Meter's: the budget ran out or the request's context
// ended. Callers tell it from a failure of the text itself (a chat template's error).
func Stopped(err error) bool {
	var tl *TooLargeError
	return errors.As(err, &tl) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
