package hf

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/routerkit/router/runtime/token"
)

// maxID bounds the ids of a vocabulary, so that a corrupt file cannot make Load allocate
// an id table of gigabytes. Real vocabularies stay below 300 000.
const maxID = 1 << 24

// fileJSON is the part of tokenizer.json that decides tokenization. truncation and padding
// are ignored, as transformers overrides both on every call.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Model         json.RawMessage `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
}

type addedJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	// special only matters to decode's skip_special_tokens, which Decode does not offer:
	// encoding matches special and other added tokens alike, as tokenizers does unless
	// split_special_tokens is set.
}

// unsupported is the error for a component this package cannot reproduce.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("%s is not supported: %w", fmt.Sprintf(format, args...), ErrUnsupported)
}

// Load reads a HuggingFace tokenizer.json, gzip-compressed or not, and returns its
// tokenizer. A file using anything but byte-level BPE with the supported normalizer,
// pre-tokenizer, post-processor and decoder fails with an error wrapping ErrUnsupported
// that names the component.
func Load(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	defer f.Close()
	t, err := parse(f, sizeHint(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// maxGzipRatio bounds the size a gzip file's trailer may announce, as a multiple of the
// file's own size: tokenizer.json compresses about 5 times, and a corrupt trailer must not
// become an allocation.
const maxGzipRatio = 32

// sizeHint guesses the bytes f holds once decompressed, so that the text is read into one
// buffer of its size rather than grown by copies: the file's size, or for a gzip file the
// size its trailer announces (the uncompressed size modulo 2^32), within maxGzipRatio
// times the file. It is only a hint: 0 when unknown, and a wrong one costs copies.
func sizeHint(f *os.File) int {
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return 0
	}
	size := info.Size()
	var head [2]byte
	var tail [4]byte
	if _, err := f.ReadAt(head[:], 0); err != nil || head != [2]byte{0x1f, 0x8b} {
		return int(size)
	}
	if _, err := f.ReadAt(tail[:], size-4); err != nil {
		return 0
	}
	return int(min(int64(binary.LittleEndian.Uint32(tail[:])), maxGzipRatio*size))
}

// parse reads tokenizer.json from r, gunzipping it if it starts with gzip's magic bytes;
// hint is its likely size once decompressed. The text is read into one string, which the
// scanner's vocabulary and merges share instead of copying them: Qwen3's file is 11 MB,
// and loading it must not hold it twice.
func parse(r io.Reader, hint int) (*Tokenizer, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	var sb strings.Builder
	sb.Grow(hint)
	if _, err := io.Copy(&sb, r); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	text := sb.String()
	f, model, ok := scanFile(text)
	if !ok {
		// encoding/json decodes what the scanner does not take, and words the error.
		f = new(fileJSON)
		if err := json.NewDecoder(strings.NewReader(text)).Decode(f); err != nil {
			return nil, fmt.Errorf("decode json: %w", err)
		}
		model = string(f.Model)
	}
	return build(f, model)
}

// build checks every component of f, whose model is model, the model first as it matters
// most, and assembles the tokenizer.
func build(f *fileJSON, model string) (*Tokenizer, error) {
	mj, vocab, merges, err := parseModel(model)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{cache: newCache(), segments: token.NewSegmentCache(token.DefaultSegmentBytes)}
	if t.nfc, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if t.model, err = newModel(vocab, merges); err != nil {
		return nil, err
	}
	entries, err := t.setVocab(vocab, f.AddedTokens)
	if err != nil {
		return nil, err
	}
	if err := t.model.setWhole(entries, t.dec.blob, mj.IgnoreMerges); err != nil {
		return nil, err
	}
	t.model.chars = t.model.newCharTable(entries, t.dec.blob)
	if t.prefix, t.suffix, err = parsePostProcessor(f.PostProcessor, t.dec.has); err != nil {
		return nil, err
	}
	return t, nil
}

// setVocab builds the decoder's id table and the added-token matchers. An added token's
// id is its vocabulary id if its content is in the vocabulary, as in tokenizers. It
// returns the spans of the vocabulary's byte-level entries in the decoder's blob by id
// (noSpan for the other ids), as they were before added tokens replaced any, for the
// table of whole tokens, which shares the blob.
func (t *Tokenizer) setVocab(vocab map[string]uint32, added []addedJSON) ([]uint64, error) {
	size := 0
	for _, id := range vocab {
		size = max(size, int(id)+1)
	}
	for _, a := range added {
		size = max(size, int(a.ID)+1)
	}
	if size > maxID {
		return nil, fmt.Errorf("vocabulary ids reach %d, more than the %d supported", size-1, maxID)
	}
	d := &t.dec
	d.spans = make([]uint64, size)
	for i := range d.spans {
		d.spans[i] = noSpan
	}
	// The blob starts with an unused byte, so that no entry starts at 0 (wholeTable's
	// free slot).
	d.blob = []byte{0}
	d.addedIDs = make(map[string]uint32, len(added))
	entries := slices.Clone(d.spans)
	for tok, id := range vocab {
		start := len(d.blob)
		var ok bool
		if d.blob, ok = appendUnByteLevel(d.blob, tok); !ok {
			d.blob = append(d.blob, tok...) // tokenizers' ByteLevel decoder keeps such tokens verbatim
		}
		d.spans[id] = uint64(start)<<32 | uint64(len(d.blob))
		if ok {
			entries[id] = d.spans[id]
		}
	}
	var b []byte
	var raw, normed []addedToken
	for _, a := range added {
		if a.Content == "" {
			continue
		}
		id := a.ID
		if vid, ok := vocab[a.Content]; ok {
			id = vid
		}
		d.addedIDs[a.Content] = id
		var ok bool
		if b, ok = appendUnByteLevel(b[:0], a.Content); !ok {
			b = append(b[:0], a.Content...)
		}
		d.set(id, b)
		tok := addedToken{content: a.Content, id: id, singleWord: a.SingleWord, lstrip: a.Lstrip, rstrip: a.Rstrip}
		if !a.Normalized {
			raw = append(raw, tok)
			continue
		}
		if t.nfc {
			tok.content = norm.NFC.String(tok.content)
		}
		normed = append(normed, tok)
	}
	d.blob = slices.Clone(d.blob) // to its length: appending left up to a quarter unused
	if len(raw) > 0 {
		t.added = newAddedSet(raw)
	}
	if len(normed) > 0 {
		t.normAdded = newAddedSet(normed)
	}
	for _, sp := range d.spans {
		if sp != noSpan {
			d.size++
		}
	}
	return entries, nil
}

// set makes b the bytes of id, replacing earlier ones: added tokens override the model's
// entry, as tokenizers looks them up first.
func (d *decoder) set(id uint32, b []byte) {
	start := len(d.blob)
	d.blob = append(d.blob, b...)
	d.spans[id] = uint64(start)<<32 | uint64(len(d.blob))
}

func (d *decoder) has(id uint32) bool {
	return int64(id) < int64(len(d.spans)) && d.spans[id] != noSpan
}

// typeOf returns the "type" of a component object.
func typeOf(raw json.RawMessage) (string, error) {
	var v struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	return v.Type, nil
}

// isNull reports whether a component is absent or null.
func isNull[T ~string | ~[]byte](raw T) bool {
	s := strings.TrimSpace(string(raw)) // no copy for a string, and components are small
	return s == "" || s == "null"
}
