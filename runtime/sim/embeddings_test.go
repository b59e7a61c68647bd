package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"testing"
)

// TestEmbeddingsBase64: OpenAI's SDKs ask for base64 vectors by default; they decode to
// the same float32 vector as the JSON form.
func TestEmbeddingsBase64(t *testing.T) {
	e := startEngine(t)
	type answer struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	var plain, b64 answer
	for _, c := range []struct {
		body string
		out  *answer
	}{{`{"input": "alpha"}`, &plain}, {`{"input": "alpha", "encoding_format": "base64"}`, &b64}} {
		status, body := do(t, http.MethodPost, e.URL()+"/v1/embeddings", c.body)
		if status != http.StatusOK || json.Unmarshal([]byte(body), c.out) != nil || len(c.out.Data) != 1 {
			t.Fatalf("%s: %d %s", c.body, status, body)
		}
	}
	var floats []float64
	var encoded string
	if err := json.Unmarshal(plain.Data[0].Embedding, &floats); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b64.Data[0].Embedding, &encoded); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(raw) != 4*len(floats) || len(floats) != embeddingDims {
		t.Fatalf("base64 vector of %d bytes for %d floats: %v", len(raw), len(floats), err)
	}
	for i, f := range floats {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != float32(f) {
			t.Errorf("dimension %d: base64 %v, JSON %v", i, got, f)
		}
	}
}
