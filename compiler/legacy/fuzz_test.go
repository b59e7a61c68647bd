package legacy

import (
	"strings"
	"testing"
)

// FuzzMigrate feeds arbitrary command lines to the migrator. Whatever the input, it either
// rejects it or returns a configuration, never both, never panics, and never produces a
// configuration that does not compile: the last would be an internal error.
func FuzzMigrate(f *testing.F) {
	f.Add(strings.Join(everything, "\x00"))
	f.Add(strings.Join(with(pdFleet, "--policy", "sticky", "--sticky-idle-secs", "1"), "\x00"))
	f.Add(strings.Join(with(plainFleet, "--policy", "session_aware", "--session-id-header", "x"), "\x00"))
	f.Add("--model-id\x00m\x00--worker-urls\x00http://[::1]:1\x00--host\x00::1")
	f.Fuzz(func(t *testing.T, line string) {
		src, p, err := Migrate(Input{Args: strings.Split(line, "\x00")})
		if (err == nil) != (src != nil && p != nil) {
			t.Fatalf("want a configuration or an error, got %q / %v / %v", src, p, err)
		}
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatal(err)
		}
	})
}
