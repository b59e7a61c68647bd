// Package hf tokenizes text exactly as a HuggingFace byte-level BPE tokenizer.json does
// (Qwen2/2.5/3, Llama 3.x, GPT-2 style), in pure Go.
//
// Cache-aware routing hashes token ids into the engine's KV block hashes, so "close" is not
// good enough: every id must be the one the engine's tokenizer (the Rust `tokenizers` crate
// behind transformers) computes. The pipeline therefore follows that crate step by step:
// added tokens are cut out of the raw text first, each remaining section is normalized
// (NFC), split into pre-tokens by the Split regex, and each pre-token's bytes are merged by
// merge rank. Anything in a tokenizer.json this package does not reproduce exactly makes
// [Load] fail with [ErrUnsupported]: callers fall back to an estimate rather than route on
// silently wrong ids.
//
// Speed matters because every request is tokenized: the split patterns in use (Qwen's,
// Llama 3's and GPT-2's) are recognised by a hand-written scanner instead of a
// backtracking regex (regexp2 remains the engine for any other pattern), merges use an
// open-addressing table, and the ids of recent pre-tokens are cached.
//
// The reference implementations the tests compare against are transformers.js
// (testdata/goldens.json) and Oniguruma (testdata/pretokens.json); Unicode classes come
// from Go's tables (Unicode 15.0), so characters assigned later may be classed
// differently from the engine's.
package hf

import (
	"errors"
	"math"
	"sync"

	"github.com/routerkit/router/runtime/token"
)

// ErrUnsupported is wrapped by the error [Load] returns for a tokenizer.json that uses a
// component this package cannot reproduce exactly.
var ErrUnsupported = errors.New("only byte-level BPE tokenizers (Qwen2/2.5/3, Llama 3.x, GPT-2 style) are; " +
	"without a tokenizer the model uses the router's stand-in vocabulary, whose counts are approximate and whose ids match no engine's")

// Tokenizer is a loaded byte-level BPE tokenizer. It is safe for concurrent use: everything
// but the pre-token cache and the pool of scratch buffers is read-only after [Load]. A
// Tokenizer must not be copied; use the pointer Load returns.
type Tokenizer struct {
	added     *addedSet // added tokens matched in the raw text
	normAdded *addedSet // added tokens with normalized true, matched after normalization; nil if none
	nfc       bool      // the normalizer is NFC
	pre       preTokenizer
	model     *model
	cache     *cache // nil disables caching
	// segments caches the ids of long texts between added tokens, each encoded on its
	// own (see encodeSection); nil disables it.
	segments *token.SegmentCache
	prefix   []uint32
	suffix   []uint32
	dec      decoder
	scratch  sync.Pool // *scratch
}

// maxPooledText is the longest text whose scratch buffers go back to the pool: the
// buffers grow with the text, and a rare huge prompt should not pin megabytes.
const maxPooledText = 256 << 10

// scratch holds the buffers of one Encode call, pooled so that steady-state encoding
// allocates little more than the returned slice. Its string slices are cleared after use,
// so that pooled buffers do not keep texts alive.
type scratch struct {
	sections []section
	hits     [][]uint32 // per section, its cached ids or nil
	inner    []section
	pieces   []string
	tmp      []string
	bpe      bpeBuf
}

// Encode returns the ids of text, as the HuggingFace tokenizer's encode with
// add_special_tokens set to addSpecial. Added-token strings inside text (for example
// "<|im_start|>") become their ids, as HuggingFace does by default. addSpecial adds the
// post-processor's template ids, such as Llama 3's <|begin_of_text|>; Qwen has none.
//
// Invalid UTF-8 in text, which the engine's tokenizer cannot receive, is encoded byte for
// byte, each invalid byte counting as one character that is neither letter, number nor
// space.
//
// meter's budget is charged len(text) first, and its context is looked at as the work
// advances: the error is the budget's *token.TooLargeError or the context's error, and
// no ids are returned with it.
func (t *Tokenizer) Encode(meter *token.Meter, text string, addSpecial bool) ([]uint32, error) {
	if err := meter.Charge(len(text)); err != nil {
		return nil, err
	}
	s, _ := t.scratch.Get().(*scratch)
	if s == nil {
		s = new(scratch)
	}
	defer func() {
		clear(s.sections) // the pool must not keep text alive
		clear(s.hits)
		if len(text) <= maxPooledText {
			t.scratch.Put(s)
		}
	}()

	s.sections = t.added.split(s.sections[:0], text)
	// The cached sections first, so that the result is allocated once at its size
	// when the text was seen before.
	n, uncached := len(t.prefix)+len(t.suffix)+1, 0
	s.hits = s.hits[:0]
	for _, sec := range s.sections {
		var hit []uint32
		switch {
		case sec.token:
			n++
		default:
			var ok bool
			switch hit, ok = t.segments.Get(sec.text); {
			case ok:
				n += len(hit)
			case len(sec.text) < token.MinSegment:
				// Never cached, and often a lone "\n" between two tokens: counted at
				// its bound of an id a byte, or a conversation's hundreds of them would
				// outgrow the estimate and copy the whole result once more.
				n += len(sec.text)
			default:
				uncached += len(sec.text)
			}
		}
		s.hits = append(s.hits, hit)
	}
	ids := token.IDs(n + uncached/3)
	if addSpecial {
		ids = append(ids, t.prefix...)
	}
	for i, sec := range s.sections {
		switch {
		case sec.token:
			ids = append(ids, sec.id)
		case s.hits[i] != nil:
			ids = append(ids, s.hits[i]...)
		default:
			start := len(ids)
			var err error
			if ids, err = t.encodeSection(ids, s, sec.text, meter); err != nil {
				token.Recycle(ids)
				return nil, err
			}
			t.segments.Put(sec.text, ids[start:])
		}
	}
	if addSpecial {
		ids = append(ids, t.suffix...)
	}
	return ids, nil
}

// encodeSection appends the ids of a stretch of text that holds no raw added token. They
// depend on that text alone, as in the tokenizers crate, which splits the raw text on
// added tokens before anything else and normalizes, pre-tokenizes and merges each
// stretch separately (lstrip and rstrip have already widened the tokens' matches); this
// is what makes the segment cache exact.
func (t *Tokenizer) encodeSection(ids []uint32, s *scratch, text string, meter *token.Meter) ([]uint32, error) {
	if t.nfc {
		text = nfc(text)
	}
	if t.normAdded == nil {
		return t.encodePlain(ids, s, text, meter)
	}
	s.inner = t.normAdded.split(s.inner[:0], text)
	defer clear(s.inner)
	for _, sec := range s.inner {
		if sec.token {
			ids = append(ids, sec.id)
			continue
		}
		var err error
		if ids, err = t.encodePlain(ids, s, sec.text, meter); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// encodePlain appends the ids of normalized text without added tokens, recording each
// pre-token's bytes as meter's work. A scanner's pre-tokens are encoded a batch at a
// time as it finds them: a list of a long text's pre-tokens would take 16 bytes per
// pre-token, up to 16 times the text.
func (t *Tokenizer) encodePlain(ids []uint32, s *scratch, text string, meter *token.Meter) ([]uint32, error) {
	if sc, ok := t.pre.scanner(); ok {
		var batch [pieceBatch]string
		for i := 0; i < len(text); {
			n := 0
			for ; n < len(batch) && i < len(text); n++ {
				j := sc.end(text, i)
				batch[n], i = text[i:j], j
			}
			var err error
			if ids, err = t.encodePieces(ids, s, batch[:n], meter); err != nil {
				return ids, err
			}
		}
		return ids, nil
	}
	if text == "" {
		return ids, nil
	}
	s.pieces, s.tmp = t.pre.split(s.pieces[:0], s.tmp[:0], text)
	defer func() {
		clear(s.pieces)
		clear(s.tmp)
	}()
	return t.encodePieces(ids, s, s.pieces, meter)
}

// pieceBatch is how many pre-tokens encodePieces looks up in the table of whole tokens
// one after the other, before encoding any: the lookups do not wait for each other, so
// the processor overlaps their cache misses, which on text never seen before are most
// of the time a pre-token takes.
const pieceBatch = 16

// noID is the id of no token.
const noID = math.MaxUint32

// encodePieces appends the ids of pre-tokens, recording each one's bytes as meter's
// work.
func (t *Tokenizer) encodePieces(ids []uint32, s *scratch, pieces []string, meter *token.Meter) ([]uint32, error) {
	var one [pieceBatch]uint32
	for len(pieces) > 0 {
		batch := pieces[:min(len(pieces), pieceBatch)]
		pieces = pieces[len(batch):]
		for k, p := range batch {
			one[k] = t.model.oneToken(p)
		}
		for k, p := range batch {
			var err error
			if one[k] != noID {
				ids = append(ids, one[k])
			} else if ids, err = t.encodeMerged(ids, s, p, meter); err != nil {
				return ids, err
			}
			if err := meter.Work(len(p)); err != nil {
				return ids, err
			}
		}
	}
	return ids, nil
}

// oneToken returns the id of the pre-token p when it is one token (a byte, or an entry of
// the table of whole tokens), else noID.
func (m *model) oneToken(p string) uint32 {
	if len(p) == 1 {
		return m.byteID[p[0]]
	}
	if id, ok := m.whole.get(p); ok {
		return id
	}
	return noID
}

// encodeMerged appends the ids of a pre-token that is not one token: cached, or merged.
func (t *Tokenizer) encodeMerged(ids []uint32, s *scratch, p string, meter *token.Meter) ([]uint32, error) {
	m := t.model
	if t.cache == nil || !cacheable(p) {
		return m.merge(ids, p, &s.bpe, meter)
	}
	h := t.cache.hash(p)
	if out, ok := t.cache.get(ids, p, h); ok {
		return out, nil
	}
	n := len(ids)
	ids, err := m.merge(ids, p, &s.bpe, meter)
	if err == nil {
		t.cache.put(p, h, ids[n:])
	}
	return ids, err
}

// TokenID returns the id of the added token whose content is content (such as
// "<|im_start|>"), and whether there is one.
func (t *Tokenizer) TokenID(content string) (uint32, bool) {
	id, ok := t.dec.addedIDs[content]
	return id, ok
}

// CacheStats returns the counters of the tokenizer's segment cache.
func (t *Tokenizer) CacheStats() token.SegmentStats {
	if t.segments == nil {
		return token.SegmentStats{}
	}
	return t.segments.Stats()
}

// VocabSize returns the number of ids Decode accepts: the model's vocabulary and the added
// tokens, each id counted once (HuggingFace's get_vocab_size with added tokens).
func (t *Tokenizer) VocabSize() int { return t.dec.size }
