package kv

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func frames(seq uint64, payload []byte) [][]byte {
	return [][]byte{[]byte("kv@E1@m"), binary.BigEndian.AppendUint64(nil, seq), payload}
}

func golden(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const goldenH1, goldenH2 = -3488128144981237669, 5674439469042975057

// The vLLM-style hashes of the golden batches, as the router reads them.
var goldenV1, goldenV2 = int64(-2686226021210368064), int64(4200000000000000001)

var (
	page1 = []uint32{1, 2, 3, 4}
	page2 = []uint32{5, 6, 7, 8}
	pages = []uint32{1, 2, 3, 4, 5, 6, 7, 8}
)

// sameEvents compares every decoded field.
func sameEvents(a, b []Event) bool {
	return slices.EqualFunc(a, b, func(a, b Event) bool {
		return a.Kind == b.Kind && slices.Equal(a.Hashes, b.Hashes) && a.Medium == b.Medium && a.BlockSize == b.BlockSize &&
			slices.Equal(a.Tokens, b.Tokens) && a.Parent == b.Parent && a.HasParent == b.HasParent && a.Foreign == b.Foreign
	})
}

// TestDecodeGolden decodes one batch of each encoding, written by testdata/kv_golden.py
// with Python's msgpack.
func TestDecodeGolden(t *testing.T) {
	tests := []struct {
		file    string
		want    []Event
		skipped int
	}{
		// SGLang's positional encoding: two pages stored, the second removed, then
		// everything cleared.
		{file: "sglang_batch.hex", want: []Event{
			{Kind: BlockStored, Hashes: []int64{goldenH1}, Medium: MediumGPU, BlockSize: 4, Tokens: page1},
			{Kind: BlockStored, Hashes: []int64{goldenH2}, Medium: MediumGPU, BlockSize: 4, Tokens: page2, Parent: goldenH1, HasParent: true},
			{Kind: BlockRemoved, Hashes: []int64{goldenH2}, Medium: MediumGPU},
			{Kind: AllBlocksCleared},
		}},
		// Older vLLM's positional encoding: two blocks in one store, extra fields.
		{file: "vllm_array_batch.hex", want: []Event{
			{Kind: BlockStored, Hashes: []int64{goldenV1, goldenV2}, Medium: MediumGPU, BlockSize: 4, Tokens: pages},
			{Kind: BlockRemoved, Hashes: []int64{goldenV2}, Medium: MediumGPU},
			{Kind: AllBlocksCleared},
		}},
		// vLLM's map events in a positional batch, with a hash sent as uint64, a CPU tier
		// and an event type this router does not know, which is skipped and counted.
		{file: "vllm_map_batch.hex", skipped: 1, want: []Event{
			{Kind: BlockStored, Hashes: []int64{goldenH1}, Medium: MediumGPU, BlockSize: 4, Tokens: page1},
			{Kind: BlockStored, Hashes: []int64{goldenH2}, Medium: MediumCPU, BlockSize: 4, Tokens: page2, Parent: goldenH1, HasParent: true},
			{Kind: BlockRemoved, Hashes: []int64{goldenH2}, Medium: MediumGPU},
			{Kind: AllBlocksCleared},
		}},
		// Current vLLM: the batch is a map too. The second block belongs to a LoRA
		// adapter, so its tokens alone do not name it.
		{file: "vllm_struct_batch.hex", want: []Event{
			{Kind: BlockStored, Hashes: []int64{goldenV1}, Medium: MediumGPU, BlockSize: 4, Tokens: page1},
			{Kind: BlockStored, Hashes: []int64{goldenV2}, Medium: MediumGPU, BlockSize: 4, Tokens: page2, Parent: goldenV1, HasParent: true, Foreign: true},
			{Kind: BlockRemoved, Hashes: []int64{goldenV1}, Medium: MediumGPU},
			{Kind: AllBlocksCleared},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := decodeMessage(frames(41, golden(t, tt.file)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.seq != 41 || m.topic != "kv@E1@m" || m.skipped != tt.skipped {
				t.Fatalf("seq, topic, skipped = %d, %q, %d", m.seq, m.topic, m.skipped)
			}
			if !sameEvents(m.events, tt.want) {
				t.Fatalf("events = %+v\nwant     %+v", m.events, tt.want)
			}
		})
	}
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := msgpack.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeTolerance(t *testing.T) {
	digest := []byte{0xcf, 0x97, 0xad, 0xee, 0xdb, 0x59, 0xe0, 0x5b, 0xff, 0xff}
	tests := []struct {
		name    string
		payload any
		want    []Event
	}{
		{name: "dp_rank omitted, trailing fields omitted",
			payload: []any{1.5, []any{[]any{"BlockStored", []any{int64(7)}, nil, []any{1, 2}}, []any{"BlockRemoved", []any{int64(7)}}}},
			want:    []Event{{Kind: BlockStored, Hashes: []int64{7}, Medium: MediumGPU, Tokens: []uint32{1, 2}}, {Kind: BlockRemoved, Hashes: []int64{7}, Medium: allMedia}}},
		{name: "nil dp_rank and small integers",
			payload: []any{1.5, []any{[]any{"BlockStored", []any{int8(3), uint16(4)}, nil, []any{}, 16, nil, "DISK"}}, nil},
			want:    []Event{{Kind: BlockStored, Hashes: []int64{3, 4}, Medium: MediumDisk, BlockSize: 16}}},
		{name: "a raw digest is read from its first 8 bytes",
			payload: []any{1.5, []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{digest}}}, 0},
			want:    []Event{{Kind: BlockRemoved, Hashes: []int64{goldenH1}, Medium: allMedia}}},
		{name: "no events", payload: []any{1.5, nil, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeMessage(frames(0, encode(t, tt.payload)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !sameEvents(m.events, tt.want) {
				t.Fatalf("events = %+v, want %+v", m.events, tt.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tooMany := make([]any, maxHashesPerEvent+1)
	for i := range tooMany {
		tooMany[i] = int64(i)
	}
	tests := []struct {
		name   string
		frames [][]byte
		want   string
	}{
		{name: "two frames", frames: [][]byte{{}, make([]byte, 8)}, want: "want 3 frames"},
		{name: "short sequence", frames: [][]byte{{}, make([]byte, 4), {0x90}}, want: "sequence frame has 4 bytes"},
		{name: "not msgpack", frames: frames(0, []byte{0xc1}), want: "decoding payload"},
		{name: "payload map without events", frames: frames(0, encode(t, map[string]any{"a": 1})), want: "payload map has no events field"},
		{name: "payload of a string", frames: frames(0, encode(t, "x")), want: "batch is string"},
		{name: "payload too short", frames: frames(0, encode(t, []any{1.5})), want: "payload has 1 fields"},
		{name: "events not an array", frames: frames(0, encode(t, []any{1.5, "x", 0})), want: "payload events are string"},
		{name: "event of a scalar", frames: frames(0, encode(t, []any{1.5, []any{7}, 0})), want: "event 0: event is int8"},
		{name: "empty event", frames: frames(0, encode(t, []any{1.5, []any{[]any{}}, 0})), want: "empty event array"},
		{name: "untagged map", frames: frames(0, encode(t, []any{1.5, []any{map[string]any{"x": 1}}, 0})), want: "no type tag"},
		{name: "hashes not an array", frames: frames(0, encode(t, []any{1.5, []any{[]any{"BlockStored", 5}}, 0})), want: "block_hashes is int8"},
		{name: "hash of a string", frames: frames(0, encode(t, []any{1.5, []any{[]any{"BlockRemoved", []any{"x"}}}, 0})), want: "block hash 0: is string"},
		{name: "short digest", frames: frames(0, encode(t, []any{1.5, []any{[]any{"BlockRemoved", []any{[]byte{1}}}}, 0})), want: "block hash 0: is 1 bytes"},
		{name: "medium of a number", frames: frames(0, encode(t, []any{1.5, []any{[]any{"BlockRemoved", []any{1}, 3}}, 0})), want: "medium is int8"},
		{name: "too many hashes", frames: frames(0, encode(t, []any{1.5, []any{[]any{"BlockRemoved", tooMany}}, 0})), want: "65537 block hashes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeMessage(tt.frames, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestCheckPayload rejects payloads whose headers promise more than they hold, before
// the msgpack library allocates what they declare.
func TestCheckPayload(t *testing.T) {
	for _, name := range []string{"sglang_batch.hex", "vllm_array_batch.hex", "vllm_map_batch.hex", "vllm_struct_batch.hex"} {
		if err := checkPayload(golden(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	deep := []byte{}
	for range maxNesting + 1 {
		deep = append(deep, 0x91)
	}
	deep = append(deep, 0xc0)
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"a map of four billion entries in 16 bytes", []byte("\xdf\xdf!\x83\xa600\xdf\xdf\xdf!M\x9d0"), "declares"},
		{"an array longer than the payload", []byte{0xdd, 0, 0, 1, 0, 0xc0}, "declares 256"},
		{"a string longer than the payload", []byte{0xd9, 9, 'a'}, "declares 9"},
		{"a truncated length", []byte{0xdf, 0}, "ends inside a length"},
		{"a truncated array", []byte{0x92, 0xc0, 0xdc}, "ends inside a length"},
		{"a truncated value", []byte{0x92, 0xcf, 0}, "declares 8"},
		{"the unused format byte", []byte{0xc1}, "0xc1"},
		{"trailing bytes", []byte{0xc0, 0xc0}, "1 bytes after"},
		{"too deep", deep, "nests deeper"},
	} {
		if err := checkPayload(tc.payload); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Every other format is walked: extension types, binary, floats, wide integers.
	ok := encode(t, []any{1.5, float32(2), []byte{1, 2}, uint64(1 << 63), int64(-1 << 40), map[string]any{"k": "v"}, nil, true})
	ok = append([]byte{0x92}, append(ok, 0xd4, 1, 2)...)
	if err := checkPayload(ok); err != nil {
		t.Errorf("valid payload: %v", err)
	}
}
