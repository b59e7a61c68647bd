package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
)

// embeddingDims is the length of the simulator's embedding vectors.
const embeddingDims = 8

// inputsRequest holds the inputs of the embedding, rerank, score and classify APIs.
type inputsRequest struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
	// EncodingFormat "base64" asks for little-endian float32 vectors in base64, which
	// OpenAI's SDKs request by default.
	EncodingFormat string          `json:"encoding_format"`
	Query          string          `json:"query"`
	Documents      []string        `json:"documents"`
	Items          []string        `json:"items"`
	Text           json.RawMessage `json:"text"`
}

// texts reads a string or an array of strings; false when raw is neither.
func texts(raw json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, true
	}
	return nil, false
}

// vector is a deterministic unit vector for text, so tests can compare answers.
func vector(text string) []float64 {
	h := fnv.New64a()
	h.Write([]byte(text))
	r := rand.New(rand.NewPCG(h.Sum64(), 0))
	v := make([]float64, embeddingDims)
	var norm float64
	for i := range v {
		v[i] = r.NormFloat64()
		norm += v[i] * v[i]
	}
	for i := range v {
		v[i] /= math.Sqrt(norm)
	}
	return v
}

// similarity is the cosine similarity of two texts' vectors: a deterministic score.
func similarity(a, b string) float64 {
	va, vb := vector(a), vector(b)
	var dot float64
	for i := range va {
		dot += va[i] * vb[i]
	}
	return dot
}

// inputs answers a request of a non-generating API right away: these engines run no
// batch, and the faults that fail or hang requests apply to them as to generation.
func (e *Engine) inputs(answer func(req *inputsRequest) (any, *badRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, handled := e.requestFaults(w, r); handled {
			return
		}
		var req inputsRequest
		if bad := readJSON(w, r, &req); bad != nil {
			writeError(w, bad.status, bad.msg)
			return
		}
		if req.Model != "" && req.Model != e.spec.Model {
			writeError(w, http.StatusNotFound, "The model `"+req.Model+"` does not exist.")
			return
		}
		out, bad := answer(&req)
		if bad != nil {
			writeError(w, bad.status, bad.msg)
			return
		}
		writeJSONBody(w, out)
	}
}

func (e *Engine) embeddings(req *inputsRequest) (any, *badRequest) {
	in, ok := texts(req.Input)
	if !ok {
		return nil, invalid("Invalid input: expected a string or a list of strings.")
	}
	data := make([]map[string]any, len(in))
	tokens := 0
	for i, t := range in {
		var v any = vector(t)
		if req.EncodingFormat == "base64" {
			v = base64Floats(vector(t))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
		tokens += len(e.encode(t))
	}
	return map[string]any{"object": "list", "data": data, "model": e.spec.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}}, nil
}

func (e *Engine) rerank(req *inputsRequest) (any, *badRequest) {
	if len(req.Documents) == 0 {
		return nil, invalid("Documents cannot be empty.")
	}
	out := make([]map[string]any, len(req.Documents))
	for i, d := range req.Documents {
		out[i] = map[string]any{"score": similarity(req.Query, d), "document": d, "index": i}
	}
	slices.SortStableFunc(out, func(a, b map[string]any) int {
		return -cmpFloat(a["score"].(float64), b["score"].(float64))
	})
	return out, nil
}

func (e *Engine) score(req *inputsRequest) (any, *badRequest) {
	if len(req.Items) == 0 {
		return nil, invalid("Items cannot be empty.")
	}
	scores := make([]float64, len(req.Items))
	for i, it := range req.Items {
		scores[i] = similarity(req.Query, it)
	}
	return map[string]any{"object": "scoring", "model": e.spec.Model, "scores": scores}, nil
}

func (e *Engine) classify(req *inputsRequest) (any, *badRequest) {
	in, ok := texts(req.Text)
	if !ok {
		return nil, invalid("Invalid text: expected a string or a list of strings.")
	}
	out := make([]map[string]any, len(in))
	for i, t := range in {
		out[i] = map[string]any{"embedding": vector(t)[:2], "meta_info": map[string]int{"prompt_tokens": len(e.encode(t))}}
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

// base64Floats encodes v as OpenAI's base64 embeddings: little-endian float32s.
func base64Floats(v []float64) string {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
