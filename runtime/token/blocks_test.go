package token

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"
)

// hashCase is one entry of testdata/block_hashes.golden.json.
type hashCase struct {
	BlockSize int      `json:"block_size"`
	TokenIDs  []uint32 `json:"token_ids"`
	Hashes    []int64  `json:"hashes"`
}

// The golden values were written by testdata/sglang_block_hash.py, a transcription of
// SGLang's Python hash functions, never by the Go code under test.
func loadGolden(t *testing.T) ([]byte, []hashCase) {
	t.Helper()
	data, err := os.ReadFile("testdata/block_hashes.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []hashCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return data, cases
}

func TestBlockHashesGolden(t *testing.T) {
	_, cases := loadGolden(t)
	for _, c := range cases {
		got := BlockHashes(c.TokenIDs, c.BlockSize)
		if !slices.Equal(got, c.Hashes) {
			t.Errorf("block size %d, %d ids: got %v, want %v", c.BlockSize, len(c.TokenIDs), got, c.Hashes)
		}
	}
}

// TestGoldenMatchesPythonReference keeps the golden file honest: rerunning the reference
// script over its inputs must reproduce it byte for byte.
func TestGoldenMatchesPythonReference(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	golden, _ := loadGolden(t)
	cmd := exec.Command(python, "testdata/sglang_block_hash.py")
	cmd.Stdin = bytes.NewReader(golden)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference script: %v", err)
	}
	if !bytes.Equal(out, golden) {
		t.Fatalf("reference script output differs from the golden file:\n%s", out)
	}
}

func TestBlockHashesChain(t *testing.T) {
	ids := Encode("one two three four five six seven eight nine ten")
	all := BlockHashes(ids, 4)
	if len(all) != len(ids)/4 {
		t.Fatalf("got %d hashes for %d ids", len(all), len(ids))
	}
	// A block's hash depends on every block before it, and only on those.
	if got := BlockHashes(ids[:8], 4); !slices.Equal(got, all[:2]) {
		t.Fatalf("prefix hashes %v differ from %v", got, all[:2])
	}
	other := slices.Clone(ids)
	other[0]++
	if got := BlockHashes(other, 4); got[1] == all[1] {
		t.Fatal("changing block 0 did not change block 1's hash")
	}
}
