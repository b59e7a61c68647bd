package main

import (
	"os"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// The README's migration example shows real output: its "before" block holds the flags of
// testdata/script/migrate_example.txtar, and its "after" block that script's golden output.
func TestReadmeMigrationExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Migrating from sgl-router\n")
	if !ok {
		t.Fatal("README has no section \"Migrating from sgl-router\"")
	}
	before := fenced(t, section, "```sh\nsgl-router ")
	after := fenced(t, section, "```cue\n")

	script, err := txtar.ParseFile("../../testdata/script/migrate_example.txtar")
	if err != nil {
		t.Fatal(err)
	}
	_, flags, _ := strings.Cut(string(script.Comment), "exec router migrate -- ")
	flags, _, _ = strings.Cut(flags, "\n")
	if got := strings.Join(strings.Fields(strings.ReplaceAll(before, "\\\n", " ")), " "); got != flags {
		t.Errorf("README before block:\n%s\nscript flags:\n%s", got, flags)
	}
	for _, f := range script.Files {
		if f.Name == "want.cue" && string(f.Data) != after {
			t.Errorf("README after block differs from the script's golden output:\n%s", f.Data)
		}
	}
}

// fenced returns the rest of the first fenced block in s that starts with open.
func fenced(t *testing.T, s, open string) string {
	t.Helper()
	_, body, ok := strings.Cut(s, open)
	if !ok {
		t.Fatalf("no block starting %q", open)
	}
	body, _, ok = strings.Cut(body, "```\n")
	if !ok {
		t.Fatalf("block starting %q is not closed", open)
	}
	return body
}

// A control character in a value that the migrated configuration's comments quote is
// refused with exit status 2: a line break would end the comment and turn the rest of
// the value into CUE.
func TestMigrateRefusesControlCharacters(t *testing.T) {
	for _, args := range [][]string{
		{"migrate", "--", "--model-id", "m\nx: 1", "--worker-urls", "http://10.0.0.1:30000"},
		{"migrate", "--bucket-config", "b\n.json", "--", "--model-id", "m", "--worker-urls", "http://10.0.0.1:30000"},
	} {
		var stdout, stderr strings.Builder
		if code := Main(append([]string{"router"}, args...), &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", args, code, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), "contains a control character") || stdout.Len() != 0 {
			t.Errorf("%q: stdout %q, stderr %q", args, stdout.String(), stderr.String())
		}
	}
}
