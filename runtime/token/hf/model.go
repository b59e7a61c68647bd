package hf

import (
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
// uses, and returns it with its vocabulary (byte-level strings to ids, sharing raw's
// memory) and the text of its merges.
func parseModel(raw string) (mj *modelJSON, vocab map[string]uint32, merges string, err error) {
	if isNull(raw) {
		return nil, nil, "", unsupported("a tokenizer without a model")
	}
	mj, vocabText, merges, ok := scanModel(raw)
	if !ok {
		mj = new(modelJSON)
		if err := json.Unmarshal([]byte(raw), mj); err != nil {
			return nil, nil, "", fmt.Errorf("model: %w", err)
		}
		vocabText, merges = string(mj.Vocab), string(mj.Merges)
		mj.Vocab, mj.Merges = nil, nil
	}
	if mj.Type == "" && merges != "" {
		mj.Type = "BPE" // files from old tokenizers versions leave out a BPE model's type
	}
	switch {
	case mj.Type != "BPE":
		return nil, nil, "", unsupported("model type %q", mj.Type)
	case mj.ByteFallback:
		return nil, nil, "", unsupported("BPE with byte_fallback (SentencePiece-style)")
	case mj.Dropout != nil && *mj.Dropout != 0:
		return nil, nil, "", unsupported("BPE with dropout")
	case mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "":
		return nil, nil, "", unsupported("BPE with continuing_subword_prefix")
	case mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "":
		return nil, nil, "", unsupported("BPE with end_of_word_suffix")
	}
	vocab, ok = scanVocab(vocabText)
	if !ok {
		if err := json.Unmarshal([]byte(vocabText), &vocab); err != nil {
			return nil, nil, "", fmt.Errorf("model vocab: %w", err)
		}
	}
	return mj, vocab, merges, nil
}

// newModel builds the byte-level model of a vocabulary and the text of its merges; its
// table of whole tokens is left empty (setWhole fills it). The vocabulary must hold the
// byte-level symbol of every byte, and each merge's parts and result must be in it
// (tokenizers refuses such files too).
func newModel(vocab map[string]uint32, merges string) (*model, error) {
	m := &model{whole: newWholeTable(0, nil)}
	for b, r := range byteRune {
		id, ok := vocab[string(r)]
		if !ok {
			return nil, unsupported("BPE vocabulary without the byte-level symbol %q of byte 0x%02X (not a byte-level vocabulary)", string(r), b)
		}
		m.byteID[b] = id
	}
	if err := m.setMerges(vocab, merges); err != nil {
		return nil, err
	}
	m.monotone = m.merges.isMonotone()
	return m, nil
}

// setMerges fills m.merges and m.ranks from the text of the merges, taking them as the
// scanner reads them rather than as a list: Qwen's 151k merges would take 4.8 MB of
// string headers. What the scanner does not take goes through encoding/json
// (decodeMerges), and so does a list with a merge that is not in the vocabulary, so that
// a syntax error anywhere in it is reported first, as when the list was decoded whole.
func (m *model) setMerges(vocab map[string]uint32, merges string) error {
	var refused error
	var ab []byte
	add := func(a, b string) bool {
		ab = append(append(ab[:0], a...), b...)
		ia, aok := vocab[a]
		ib, bok := vocab[b]
		ic, cok := vocab[string(ab)]
		if !aok || !bok || !cok {
			refused = fmt.Errorf("merge %d (%q %q): token not in the vocabulary", m.ranks, a, b)
			return false
		}
		if max(ia, ib, ic) >= maxID || m.ranks >= maxRanks {
			refused = fmt.Errorf("merge %d (%q %q): ids reach %d, more than the %d supported, or more than %d merges", m.ranks, a, b, max(ia, ib, ic), maxID, maxRanks)
			return false
		}
		// A repeated pair keeps its last rank, as in tokenizers' map from pairs to ranks.
		m.merges.put(uint64(ia)<<32|uint64(ib), uint64(m.ranks)<<32|uint64(ic))
		m.ranks++
		return true
	}
	m.merges = newMergeTable(mergesBound(merges))
	if !scanMerges(merges, add) && refused == nil {
		pairs, err := decodeMerges(merges)
		if err != nil {
			return err
		}
		m.merges, m.ranks = newMergeTable(len(pairs)), 0
		for _, p := range pairs {
			if !add(p[0], p[1]) {
				break
			}
		}
	}
	if refused != nil {
		if _, err := decodeMerges(merges); err != nil {
			return err
		}
		return refused
	}
	return nil
}

// setWhole fills m.whole from the vocabulary's entries, given by id as spans of blob
// (start<<32 | end; noSpan for an id without one): with every entry under ignore_merges,
// otherwise with those that merge into themselves. The table refers to the entries in
// blob, the decoder's, rather than holding a copy. Merging each of Qwen's 151k entries is
// most of what this adds to Load.
func (m *model) setWhole(entries []uint64, blob []byte, ignoreMerges bool) error {
	n := 0
	for _, sp := range entries {
		if sp != noSpan {
			n++
		}
	}
	m.whole = newWholeTable(n, blob)
	var buf bpeBuf
	var ids []uint32
	for id, sp := range entries {
		start, end := int(sp>>32), int(uint32(sp))
		switch {
		case sp == noSpan || start == end:
			continue
		case ignoreMerges:
			if !m.whole.put(start, end-start, uint32(id)) {
				return unsupported("BPE with ignore_merges and a vocabulary entry of %d bytes, or more than %d bytes of entries", end-start, maxWholeBlob)
			}
		case end-start <= maxWhole:
			// Longer entries are merged like any other pre-token. No meter: an entry
			// is at most maxWhole bytes.
			if ids, _ = m.merge(ids[:0], string(blob[start:end]), &buf, nil); len(ids) == 1 && ids[0] == uint32(id) {
				m.whole.put(start, end-start, uint32(id))
			}
		}
	}
	return nil
}

// decodeMerges reads "merges" in either form, ["a b", ...] or [["a", "b"], ...], through
// encoding/json, for what scanMerges does not take.
func decodeMerges(raw string) ([][2]string, error) {
	var pairs [][2]string
	body := strings.TrimLeft(raw, " \t\r\n")
	if len(body) > 0 && body[0] == '[' {
		body = strings.TrimLeft(body[1:], " \t\r\n")
	}
	if len(body) == 0 || body[0] != '"' {
		if err := json.Unmarshal([]byte(raw), &pairs); err != nil {
			return nil, fmt.Errorf("model merges: %w", err)
		}
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal([]byte(raw), &lines); err != nil {
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
