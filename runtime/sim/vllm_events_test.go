package sim

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEncodeVLLMBatchGolden checks the vLLM kind's encodings and block hashes against
// testdata/vllm_batch_golden.py, which computes them with Python's cbor2, hashlib and
// msgpack as vLLM does.
func TestEncodeVLLMBatchGolden(t *testing.T) {
	const h1, h2 = -3488128144981237669, 5674439469042975057 // the cache's SGLang names
	events := []kvEvent{
		{kind: blockStored, hash: h1, tokens: []uint32{1, 2, 3, 4}},
		{kind: blockStored, hash: h2, parent: h1, hasParent: true, tokens: []uint32{5, 6, 7, 8}},
		{kind: blockRemoved, hash: h2},
		{kind: allBlocksCleared},
	}
	for _, tc := range []struct {
		file  string
		asMap bool
	}{{"vllm_map_batch.golden.hex", true}, {"vllm_array_batch.golden.hex", false}} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := newVLLMHasher("V1").encodeBatch(time.Unix(1700000000, 250000000), events, 1, 4, tc.asMap)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(got) != strings.TrimSpace(string(want)) {
				t.Fatalf("encoded batch\n%x\ndiffers from testdata/%s\n%s", got, tc.file, want)
			}
		})
	}
}
