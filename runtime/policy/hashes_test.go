package policy

import (
	"slices"
	"testing"

	"github.com/routerkit/router/runtime/token"
)

func TestBlockHashesComputedOncePerSize(t *testing.T) {
	h := NewBlockHashes(ids(40))
	if got := h.Of(16); !slices.Equal(got, token.BlockHashes(ids(40), 16)) || len(got) != 2 {
		t.Fatalf("Of(16) = %v", got)
	}
	first := h.Of(16)
	if &h.Of(16)[0] != &first[0] {
		t.Fatal("Of(16) was computed twice")
	}
	if len(h.Of(8)) != 5 || h.Of(64) != nil || h.Of(0) != nil {
		t.Fatal("Of for other sizes is wrong")
	}
}
