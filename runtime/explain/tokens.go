package explain

import (
	"fmt"
	"io"
	"strings"

	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/token"
)

// shownHashes is how many leading block hashes an explanation lists per block size: enough
// to compare with an engine's BlockStored events by eye.
const shownHashes = 4

// Tokens is what the router computed from a request's text: the count bucket limits
// were checked on and the first block hashes prefix lookups used.
type Tokens struct {
	// Tokenizer names the model's tokenizer: its tokenizer.json, or "stand-in".
	Tokenizer string   `json:"tokenizer"`
	Count     int      `json:"count"`
	Blocks    []Blocks `json:"blocks"`
}

// Blocks are the prompt's SGLang block hashes at one engine page size.
type Blocks struct {
	BlockSize int     `json:"block_size"`
	Count     int     `json:"count"`
	First     []int64 `json:"first"`
}

// SetTokens records the ids the router computed for the request, hashed at each of the
// model's block sizes: those of its KV-event engines, or the default page size when none
// publishes events.
func (x *Explanation) SetTokens(tokenizer string, ids []uint32, blockSizes []int) {
	if len(blockSizes) == 0 {
		blockSizes = []int{kv.DefaultBlockSize}
	}
	t := &Tokens{Tokenizer: tokenizer, Count: len(ids), Blocks: []Blocks{}}
	for _, bs := range blockSizes {
		hashes := token.BlockHashes(ids, bs)
		t.Blocks = append(t.Blocks, Blocks{BlockSize: bs, Count: len(hashes), First: hashes[:min(len(hashes), shownHashes)]})
	}
	x.Tokens = t
}

func (t *Tokens) writeText(w io.Writer) {
	fmt.Fprintf(w, "tokens: %d by %s\n", t.Count, t.Tokenizer)
	for _, b := range t.Blocks {
		first := make([]string, len(b.First))
		for i, h := range b.First {
			first[i] = fmt.Sprint(h)
		}
		more := ""
		if b.Count > len(b.First) {
			more = ", ..."
		}
		fmt.Fprintf(w, "  %d blocks of %d tokens: %s%s\n", b.Count, b.BlockSize, strings.Join(first, ", "), more)
	}
}
