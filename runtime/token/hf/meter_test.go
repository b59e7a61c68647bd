package hf

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

// endsAfter is a context that ends once its Err has been asked more than ok times: the
// request leaves in the middle of a tokenization, at a point the test chooses.
type endsAfter struct {
	context.Context
	ok, asked int
}

func (c *endsAfter) Err() error {
	if c.asked++; c.asked > c.ok {
		return context.Canceled
	}
	return nil
}

// TestEncodeStopsWhenTheRequestEnds: a tokenization whose context ends part way returns
// the context's error having done a few CheckEvery of work, not the whole text; so does
// the merging of one long pre-token, by mergeRanks and by mergeHeap, before that
// pre-token is done.
func TestEncodeStopsWhenTheRequestEnds(t *testing.T) {
	base := uncached(loadQwen(t))
	prose, err := os.ReadFile("testdata/text/prose.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat(string(prose), (1<<20)/len(prose)) // 1 MiB
	ctx := &endsAfter{Context: context.Background(), ok: 3}   // Charge's look, then two of Work's
	meter := token.NewMeter(ctx, 0)
	ids, err := base.Encode(meter, text, false)
	if !errors.Is(err, context.Canceled) || ids != nil {
		t.Fatalf("Encode under a context that ends = %d ids, %v; want none and Canceled", len(ids), err)
	}
	if done := meter.Done(); done < 3*token.CheckEvery || done > 3*token.CheckEvery+int64(len(prose)) {
		t.Fatalf("Encode stopped after %d of %d bytes, want just past %d", done, len(text), 3*token.CheckEvery)
	}

	heap := uncached(base)
	model := *base.model
	model.monotone = false
	heap.model = &model
	word := strings.Repeat("ab", 128<<10) // one pre-token of 256 KiB, not a few runs
	for name, tok := range map[string]*Tokenizer{"mergeRanks": base, "mergeHeap": heap} {
		ctx := &endsAfter{Context: context.Background(), ok: 1} // Charge's look only
		meter := token.NewMeter(ctx, 0)
		if _, err := tok.Encode(meter, word, false); !errors.Is(err, context.Canceled) || meter.Done() != 0 || ctx.asked != 2 {
			t.Errorf("%s: Encode = %v after %d bytes done and %d looks, want Canceled in the middle of the pre-token",
				name, err, meter.Done(), ctx.asked)
		}
	}
}

// TestEncodeBudget: a text over the meter's budget fails before any work with a
// TooLargeError, the meter's texts count together, and a Model's chat is charged its
// rendered prompt.
func TestEncodeBudget(t *testing.T) {
	tok := loadQwen(t)
	meter := token.NewMeter(context.Background(), 100)
	if _, err := tok.Encode(meter, strings.Repeat("a", 60), false); err != nil {
		t.Fatal(err)
	}
	var tl *token.TooLargeError
	if _, err := tok.Encode(meter, strings.Repeat("b", 41), false); !errors.As(err, &tl) || tl.Size != 101 || meter.Done() != 60 {
		t.Fatalf("the second text past the budget: %v after %d bytes done, want a TooLargeError of 101 bytes after 60", err, meter.Done())
	}
	m, err := Open(plan.Tokenizer{Path: qwenPath, Config: "../../../testdata/tokenizers/qwen3/tokenizer_config.json", EngineKind: plan.KindSGLang})
	if err != nil {
		t.Fatal(err)
	}
	msgs := `[{"role":"user","content":"` + strings.Repeat("c", 80) + `"}]`
	if _, err := m.EncodeChat(token.NewMeter(context.Background(), 100), token.Chat{Messages: []byte(msgs)}); !errors.As(err, &tl) || tl.Size <= 80 {
		t.Fatalf("a chat of 80 bytes whose rendered prompt is over 100: %v, want a TooLargeError of the prompt's size", err)
	}
}
