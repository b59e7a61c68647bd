package main

import (
	"os"
	"strings"
	"testing"
)

// TestConfigDocExamples keeps the complete configs of docs/config.md's "Running against
// SGLang" and "Running against vLLM" identical to testdata/config/sglang.yaml and
// vllm.yaml, which validate_examples.txtar validates and compiles.
func TestConfigDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ section, file string }{
		{"## Running against SGLang\n", "sglang.yaml"},
		{"## Running against vLLM\n", "vllm.yaml"},
	} {
		_, section, ok := strings.Cut(string(doc), tc.section)
		if !ok {
			t.Fatalf("docs/config.md has no section %q", strings.TrimSpace(tc.section))
		}
		want, err := os.ReadFile("../../testdata/config/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := fenced(t, section, "```yaml\n"); got != string(want) {
			t.Errorf("%s: the doc's config differs from testdata/config/%s:\n%s", strings.TrimSpace(tc.section), tc.file, got)
		}
	}
}
