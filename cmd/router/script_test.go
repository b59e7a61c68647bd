package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"router": main})
}

// TestScripts runs every testdata/script/*.txtar against the real router binary.
// $CONFIG points at testdata/config so scripts share the example configs with the docs;
// $TOKENIZERS at testdata/tokenizers, the real tokenizers.
// ROUTER_UPDATE=1 rewrites the expected output in the scripts.
func TestScripts(t *testing.T) {
	configDir, err := filepath.Abs("../../testdata/config")
	if err != nil {
		t.Fatal(err)
	}
	tokenizers, err := filepath.Abs("../../testdata/tokenizers")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds:                scriptCmds,
		UpdateScripts:       os.Getenv("ROUTER_UPDATE") != "",
		Setup: func(env *testscript.Env) error {
			env.Setenv("CONFIG", configDir)
			env.Setenv("TOKENIZERS", tokenizers)
			// A race-enabled binary sleeps a second at exit by default; scripts run the
			// router dozens of times.
			env.Setenv("GORACE", "atexit_sleep_ms=0")
			return setupTLS(env)
		},
	})
}
