package hf

import (
	"encoding/json"
	"fmt"
)

// parseNormalizer accepts null, NFC and Sequences of those, and reports whether the text
// is to be NFC-normalized.
func parseNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return false, fmt.Errorf("normalizer: %w", err)
	}
	switch n.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for _, sub := range n.Normalizers {
			subNFC, err := parseNormalizer(sub)
			if err != nil {
				return false, err
			}
			nfc = nfc || subNFC // NFC is idempotent
		}
		return nfc, nil
	}
	return false, unsupported("normalizer %q (only NFC is)", n.Type)
}

// preTokenizerJSON is a pre_tokenizer object; the fields used depend on the type.
type preTokenizerJSON struct {
	Type          string            `json:"type"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace *bool  `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// parsePreTokenizer accepts Split pre-tokenizers (Regex pattern, behavior Isolated or
// Removed) followed by one ByteLevel, nested in Sequences or not.
func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	var list []preTokenizerJSON
	if err := flattenPreTokenizers(raw, &list); err != nil {
		return preTokenizer{}, err
	}
	var p preTokenizer
	for i, pj := range list {
		switch pj.Type {
		case "ByteLevel":
			if i != len(list)-1 {
				return preTokenizer{}, unsupported("a pre-tokenizer after ByteLevel")
			}
			st := step{prefixSpace: pj.AddPrefixSpace == nil || *pj.AddPrefixSpace}
			if pj.UseRegex == nil || *pj.UseRegex {
				sp, err := newSplitter(gpt2Pattern, keepAll)
				if err != nil {
					return preTokenizer{}, err
				}
				st.split = sp
			}
			if st.prefixSpace || st.split != nil {
				p.steps = append(p.steps, st)
			}
		case "Split":
			if pj.Pattern.Regex == nil {
				return preTokenizer{}, unsupported("Split pre-tokenizer with a String pattern")
			}
			// invert swaps the roles of matches and the text between them; Isolated keeps
			// both anyway.
			var k keep
			switch {
			case pj.Behavior == "Isolated":
				k = keepAll
			case pj.Behavior == "Removed" && pj.Invert:
				k = keepMatches
			case pj.Behavior == "Removed":
				k = keepGaps
			default:
				return preTokenizer{}, unsupported("Split pre-tokenizer with behavior %q (only Isolated and Removed are)", pj.Behavior)
			}
			sp, err := newSplitter(*pj.Pattern.Regex, k)
			if err != nil {
				return preTokenizer{}, fmt.Errorf("pre_tokenizer: %w", err)
			}
			p.steps = append(p.steps, step{split: sp})
		default:
			return preTokenizer{}, unsupported("pre_tokenizer %q", pj.Type)
		}
	}
	if len(list) == 0 || list[len(list)-1].Type != "ByteLevel" {
		return preTokenizer{}, unsupported("a pre_tokenizer that does not end with ByteLevel")
	}
	return p, nil
}

// flattenPreTokenizers appends the pre-tokenizers of raw to list, expanding Sequences.
func flattenPreTokenizers(raw json.RawMessage, list *[]preTokenizerJSON) error {
	if isNull(raw) {
		return nil
	}
	var pj preTokenizerJSON
	if err := json.Unmarshal(raw, &pj); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	if pj.Type != "Sequence" {
		*list = append(*list, pj)
		return nil
	}
	for _, sub := range pj.Pretokenizers {
		if err := flattenPreTokenizers(sub, list); err != nil {
			return err
		}
	}
	return nil
}

// templateJSON is a post_processor object; the fields used depend on the type.
type templateJSON struct {
	Type       string            `json:"type"`
	Processors []json.RawMessage `json:"processors"`
	Single     []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
		Sequence *struct {
			ID string `json:"id"`
		} `json:"Sequence"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
}

// parsePostProcessor accepts null, ByteLevel (which changes no ids), TemplateProcessing
// and Sequences of those, and returns the ids that add_special_tokens puts before and
// after the text. known reports whether an id exists.
func parsePostProcessor(raw json.RawMessage, known func(uint32) bool) (prefix, suffix []uint32, err error) {
	if isNull(raw) {
		return nil, nil, nil
	}
	var pj templateJSON
	if err := json.Unmarshal(raw, &pj); err != nil {
		return nil, nil, fmt.Errorf("post_processor: %w", err)
	}
	switch pj.Type {
	case "ByteLevel":
		return nil, nil, nil
	case "Sequence":
		// Each processor wraps the result of the previous one.
		for _, sub := range pj.Processors {
			p, s, err := parsePostProcessor(sub, known)
			if err != nil {
				return nil, nil, err
			}
			prefix = append(p, prefix...)
			suffix = append(suffix, s...)
		}
		return prefix, suffix, nil
	case "TemplateProcessing":
		seen := false
		for _, piece := range pj.Single {
			switch {
			case piece.Sequence != nil && piece.Sequence.ID == "A" && !seen:
				seen = true
			case piece.SpecialToken != nil:
				st, ok := pj.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, nil, fmt.Errorf("post_processor: template token %q has no ids", piece.SpecialToken.ID)
				}
				for _, id := range st.IDs {
					if !known(id) {
						return nil, nil, fmt.Errorf("post_processor: template token %q has id %d, which is not in the vocabulary", piece.SpecialToken.ID, id)
					}
				}
				if seen {
					suffix = append(suffix, st.IDs...)
				} else {
					prefix = append(prefix, st.IDs...)
				}
			default:
				return nil, nil, unsupported("TemplateProcessing single template other than special tokens around one $A")
			}
		}
		if !seen {
			return nil, nil, unsupported("TemplateProcessing single template without $A")
		}
		return prefix, suffix, nil
	}
	return nil, nil, unsupported("post_processor %q", pj.Type)
}

// parseDecoder accepts only the ByteLevel decoder, the one byte-level BPE needs.
func parseDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return unsupported("a tokenizer without a ByteLevel decoder")
	}
	typ, err := typeOf(raw)
	if err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if typ != "ByteLevel" {
		return unsupported("decoder %q", typ)
	}
	return nil
}
