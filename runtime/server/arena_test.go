package server

import (
	"flag"
	"os"
	"testing"

	"github.com/routerkit/router/runtime/arena"
)

// TestMain runs this package's tests with the request arenas poisoned on release (see
// package arena): a decoded string or rendered prompt read after its request's Chat
// returned would read garbage, and the tests comparing ids, names and answers would
// fail. Benchmarks run without it, as a router does.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		arena.Poison(true)
	}
	os.Exit(m.Run())
}
