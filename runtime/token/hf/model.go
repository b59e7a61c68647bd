package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// modelJSON is tokenizer.json's "model".
type modelJSON struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"` // decoded once the type is known
	Merges                  json.RawMessage `json:"merges"`
}

// parseModel checks that raw is a BPE model without the options byte-level BPE never
// uses, and returns it with its vocabulary (byte-level strings to ids).
func parseModel(raw json.RawMessage) (*modelJSON, map[string]uint32, error) {
	if isNull(raw) {
		return nil, nil, unsupported("a tokenizer without a model")
	}
	mj, ok := scanModel(raw)
	if !ok {
		mj = new(modelJSON)
		if err := json.Unmarshal(raw, mj); err != nil {
			return nil, nil, fmt.Errorf("model: %w", err)
		}
	}
	if mj.Type == "" && mj.Merges != nil {
		mj.Type = "BPE" // files from old tokenizers versions leave out a BPE model's type
	}
	switch {
	case mj.Type != "BPE":
		return nil, nil, unsupported("model type %q", mj.Type)
	case mj.ByteFallback:
		return nil, nil, unsupported("BPE with byte_fallback (SentencePiece-style)")
	case mj.Dropout != nil && *mj.Dropout != 0:
		return nil, nil, unsupported("BPE with dropout")
	case mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "":
		return nil, nil, unsupported("BPE with continuing_subword_prefix")
	case mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "":
		return nil, nil, unsupported("BPE with end_of_word_suffix")
	}
	vocab, ok := scanVocab(mj.Vocab)
	if !ok {
		if err := json.Unmarshal(mj.Vocab, &vocab); err != nil {
			return nil, nil, fmt.Errorf("model vocab: %w", err)
		}
	}
	return mj, vocab, nil
}

// newModel builds the byte-level model of mj and its vocabulary. The vocabulary must hold the byte-level
// symbol of every byte, and each merge's parts and result must be in it (tokenizers
// refuses such files too).
func newModel(mj *modelJSON, vocab map[string]uint32) (*model, error) {
	m := new(model)
	for b, r := range byteRune {
		id, ok := vocab[string(r)]
		if !ok {
			return nil, unsupported("BPE vocabulary without the byte-level symbol %q of byte 0x%02X (not a byte-level vocabulary)", string(r), b)
		}
		m.byteID[b] = id
	}
	merges, err := parseMerges(mj.Merges)
	if err != nil {
		return nil, err
	}
	m.merges = newMergeTable(len(merges))
	for rank, mg := range merges {
		a, aok := vocab[mg[0]]
		b, bok := vocab[mg[1]]
		c, cok := vocab[mg[0]+mg[1]]
		if !aok || !bok || !cok {
			return nil, fmt.Errorf("merge %d (%q %q): token not in the vocabulary", rank, mg[0], mg[1])
		}
		// A repeated pair keeps its last rank, as in tokenizers' map from pairs to ranks.
		m.merges.put(uint64(a)<<32|uint64(b), uint64(rank)<<32|uint64(c))
	}
	m.ranks, m.monotone = len(merges), m.merges.isMonotone()
	if err := m.setWhole(vocab, mj.IgnoreMerges); err != nil {
		return nil, err
	}
	m.chars = m.newCharTable(vocab)
	return m, nil
}

// setWhole fills m.whole: with every entry under ignore_merges, otherwise with those
// that merge into themselves. Merging each of Qwen's 151k entries is most of what this
// adds to Load.
func (m *model) setWhole(vocab map[string]uint32, ignoreMerges bool) error {
	m.whole = newWholeTable(len(vocab))
	var buf bpeBuf
	var ids []uint32
	for tok, id := range vocab {
		b, ok := unByteLevel(tok)
		switch {
		case !ok || len(b) == 0:
			continue
		case ignoreMerges:
			if !m.whole.put(b, id) {
				return unsupported("BPE with ignore_merges and a vocabulary entry of %d bytes, or more than %d bytes of entries", len(b), maxWholeBlob)
			}
		case len(b) <= maxWhole:
			// Longer entries are merged like any other pre-token. No meter: an entry
			// is at most maxWhole bytes.
			if ids, _ = m.merge(ids[:0], string(b), &buf, nil); len(ids) == 1 && ids[0] == id {
				m.whole.put(b, id)
			}
		}
	}
	return nil
}

// parseMerges accepts both forms of "merges": ["a b", ...] and [["a", "b"], ...].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if pairs, ok := scanMerges(raw); ok {
		return pairs, nil
	}
	return decodeMerges(raw)
}

// decodeMerges is parseMerges through encoding/json, for what scanMerges does not take.
func decodeMerges(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	body := bytes.TrimLeft(raw, " \t\r\n")
	if len(body) > 0 && body[0] == '[' {
		body = bytes.TrimLeft(body[1:], " \t\r\n")
	}
	if len(body) == 0 || body[0] != '"' {
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, fmt.Errorf("model merges: %w", err)
		}
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("model merges: %w", err)
	}
	pairs = make([][2]string, 0, len(lines))
	for _, l := range lines {
		if strings.HasPrefix(l, "#version") {
			continue
		}
		a, b, ok := strings.Cut(l, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, fmt.Errorf("model merges: %q is not two tokens separated by one space", l)
		}
		pairs = append(pairs, [2]string{a, b})
	}
	return pairs, nil
}
