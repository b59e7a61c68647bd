package hf

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/routerkit/router/runtime/token"
)

// uncached returns a copy of t without the pre-token and segment caches.
func uncached(t *Tokenizer) *Tokenizer {
	return &Tokenizer{added: t.added, normAdded: t.normAdded, nfc: t.nfc, pre: t.pre, model: t.model,
		prefix: t.prefix, suffix: t.suffix, dec: t.dec}
}

// BenchmarkEncode measures Encode on the documents of testdata/text (English prose, Go
// and Python source, Chinese/Japanese/Korean text) and on two of 1 MiB of whitespace,
// each one pre-token: "spaces" is one run of spaces (mergeRuns), "lines" lines of 4095
// spaces (mergeRanks). The cases say what the tokenizer has seen:
//
//   - "seen": the text was encoded before, and its ids come from the segment cache;
//   - "cold": a tokenizer whose pre-token and segment caches are empty;
//   - "new": text never seen, by a tokenizer whose pre-token cache is full of other
//     text's pre-tokens (otherText), so that each of the text's misses also evicts;
//   - "stream": text never seen, as a server meets it: a stream of documents that are
//     the text with every pre-token the cache could hold made new (newDocs), encoded one
//     after the other by a tokenizer whose pre-token cache was first filled with other
//     text, with no reset between them (see below);
//   - "off": no pre-token or segment cache: the pre-tokenizer, the table of whole
//     tokens (wholeTable) and merging alone;
//   - "heap": as off, with the merge order of the tokenizers crate, one heap of every
//     candidate (mergeHeap), as before mergeRanks.
//
// Cold and new set their caches' state before each iteration with the timer stopped, so
// their figures include what encoding spends filling the caches; but the reset also
// empties the processor's caches of the tables encoding reads (the table of whole
// tokens, the merge table), which no server's request does, and that costs most of
// their time: with the same reset done to another tokenizer's caches, "off" is as slow
// as "new". Stream measures text never seen without it.
func BenchmarkEncode(b *testing.B) {
	tok := loadQwen(b)
	heap := uncached(tok)
	model := *tok.model
	model.monotone = false
	heap.model = &model
	warm := withCaches(tok)
	warm.encodeAll(otherText(), false)
	fresh := withCaches(tok)
	fresh.cache.seed = warm.cache.seed
	for _, doc := range []string{"prose", "code", "cjk", "spaces", "lines"} {
		var text string
		switch doc {
		case "spaces":
			text = strings.Repeat(" ", 1<<20)
		case "lines":
			text = strings.Repeat(strings.Repeat(" ", 4095)+"\n", 256)
		default:
			text = readText(b, doc)
		}
		b.Run(doc+"/seen", func(b *testing.B) {
			tok.encodeAll(text, false)
			benchEncode(b, tok, text, nil)
		})
		if doc == "prose" || doc == "code" || doc == "cjk" {
			b.Run(doc+"/cold", func(b *testing.B) {
				benchEncode(b, fresh, text, func() { setCaches(fresh, nil) })
			})
			b.Run(doc+"/new", func(b *testing.B) {
				benchEncode(b, fresh, text, func() { setCaches(fresh, warm) })
			})
			b.Run(doc+"/stream", func(b *testing.B) {
				setCaches(fresh, warm)
				benchStream(b, fresh, text)
			})
		}
		b.Run(doc+"/off", func(b *testing.B) {
			benchEncode(b, uncached(tok), text, nil)
		})
		b.Run(doc+"/heap", func(b *testing.B) {
			benchEncode(b, heap, text, nil)
		})
	}
}

// BenchmarkEncodeConversation measures Encode, cold, on a ChatML prompt of 620 kB of
// English prose as the chat template renders a long conversation (proseChat's in
// runtime/server): 146 turns of the prose document, each opened by a mark of its own.
// Within the prompt, turns after the first find their pre-tokens in the cache, as a
// conversation's words recur; no segment is found in the segment cache.
func BenchmarkEncodeConversation(b *testing.B) {
	tok := loadQwen(b)
	prose := readText(b, "prose")
	var sb strings.Builder
	for i := 0; sb.Len() < 620_000; i++ {
		role := [2]string{"user", "assistant"}[i%2]
		fmt.Fprintf(&sb, "<|im_start|>%s\nturn%08d %s<|im_end|>\n", role, i, prose)
	}
	sb.WriteString("<|im_start|>assistant\n")
	fresh := withCaches(tok)
	benchEncode(b, fresh, sb.String(), func() { setCaches(fresh, nil) })
}

func readText(b testing.TB, doc string) string {
	data, err := os.ReadFile("testdata/text/" + doc + ".txt")
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

// withCaches returns a copy of t with empty pre-token and segment caches.
func withCaches(t *Tokenizer) *Tokenizer {
	c := uncached(t)
	c.cache, c.segments = newCache(), token.NewSegmentCache(token.DefaultSegmentBytes)
	return c
}

// setCaches gives t an empty segment cache and a pre-token cache that holds what from's
// holds, or nothing when from is nil. It reuses t's maps and slots: garbage of the
// benchmark's own would be collected while the timer runs. The two must share a seed.
func setCaches(t, from *Tokenizer) {
	t.segments = token.NewSegmentCache(token.DefaultSegmentBytes)
	for i := range t.cache.shards {
		s := &t.cache.shards[i]
		clear(s.index)
		s.slots, s.hand, s.door = s.slots[:0], 0, [doorSlots]uint32{}
		if from != nil {
			f := &from.cache.shards[i]
			maps.Copy(s.index, f.index)
			s.slots, s.hand, s.door = append(s.slots, f.slots...), f.hand, f.door
		}
	}
}

// otherText is text that shares no pre-token with the documents: made-up words of
// consonants, long enough to be cached (minCachedKey), more of them than the pre-token
// cache holds (cacheShards*shardEntries), each twice in a row, as the cache takes a
// pre-token on its second miss.
func otherText() string {
	r := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	word := make([]byte, 0, minCachedKey+8)
	for range cacheShards * shardEntries * 3 / 2 {
		word = append(word[:0], ' ')
		for n := minCachedKey + r.IntN(8); n > 0; n-- {
			word = append(word, "bcdfghjklmnpqrstvwxz"[r.IntN(20)])
		}
		sb.Write(word)
		sb.Write(word)
	}
	return sb.String()
}

// streamDocs is how many documents benchStream makes at a time.
const streamDocs = 64

// benchStream encodes b.N documents of newDocs(tok, text), each once, with tok. It makes
// them streamDocs at a time with the timer stopped: as rare a reset as that does not
// empty the processor's caches before each document, as benchEncode's does.
func benchStream(b *testing.B, tok *Tokenizer, text string) {
	r := rand.New(rand.NewPCG(3, 4))
	var docs []string
	m := startMeter(b)
	for i := 0; b.Loop(); i++ {
		if i%streamDocs == 0 {
			b.StopTimer()
			docs = newDocs(tok, text, r)
			b.StartTimer()
			m.restart(b)
		}
		tok.encodeAll(docs[i%streamDocs], false)
		m.add(b)
	}
	m.report(b, len(text))
}

// newDocs returns streamDocs copies of text in which every pre-token that the pre-token
// cache could hold (one of minCachedKey to maxCachedKey bytes that is not one token) has
// two more letters, each a copy of one of its letters put between two of its letters at
// random: the copies are text never seen (a pre-token of n letters has about (n*n)^2
// such variants; the cache holds its last 32,768 pre-tokens), with the pre-tokens, the
// mix of work and nearly the letter pairs of text.
func newDocs(tok *Tokenizer, text string, r *rand.Rand) []string {
	sc, ok := tok.pre.scanner()
	if !ok {
		panic("newDocs needs a scanner")
	}
	docs := make([]string, streamDocs)
	for d := range docs {
		var sb strings.Builder
		for i := 0; i < len(text); {
			j := sc.end(text, i)
			p := text[i:j]
			i = j
			if len(p) < minCachedKey || len(p) > maxCachedKey || tok.model.oneToken(p) != noID {
				sb.WriteString(p)
				continue
			}
			runes := []rune(p)
			for range 2 {
				var letters []int // positions of the letters
				for k, c := range runes {
					if unicode.IsLetter(c) {
						letters = append(letters, k)
					}
				}
				if len(letters) < 2 {
					break
				}
				at := letters[1+r.IntN(len(letters)-1)]
				runes = slices.Insert(runes, at, runes[letters[r.IntN(len(letters))]])
			}
			sb.WriteString(string(runes))
		}
		docs[d] = sb.String()
	}
	return docs
}

// benchEncode encodes s b.N times with tok, calling reset, when not nil, before each
// with the timer stopped. Besides the usual per-op figures it reports allocations per KB
// of text (with reset, they count reset's too: -benchmem's allocs/op, taken with the
// timer running, are the encoding's alone) and cpu-MB/s, text per second of the
// process's CPU time while the timer runs, which on a machine shared with other jobs is
// steadier than MB/s of wall time.
func benchEncode(b *testing.B, tok *Tokenizer, s string, reset func()) {
	m := startMeter(b)
	for b.Loop() {
		if reset != nil {
			b.StopTimer()
			reset()
			b.StartTimer()
			m.restart(b)
		}
		tok.encodeAll(s, false)
		m.add(b)
	}
	m.report(b, len(s))
}

// cpuMeter adds up the process's CPU time over the stretches the timer runs.
type cpuMeter struct {
	before runtime.MemStats
	cpu0   time.Duration // at the start of the stretch
	cpu    time.Duration // of the stretches ended
}

func startMeter(b *testing.B) *cpuMeter {
	m := &cpuMeter{}
	runtime.ReadMemStats(&m.before)
	m.cpu0 = processCPU(b)
	return m
}

// restart starts a stretch, after the timer has been stopped.
func (m *cpuMeter) restart(b *testing.B) { m.cpu0 = processCPU(b) }

// add ends a stretch and starts the next.
func (m *cpuMeter) add(b *testing.B) {
	now := processCPU(b)
	m.cpu += now - m.cpu0
	m.cpu0 = now
}

// report reports allocations per KB of text and cpu-MB/s for b.N texts of n bytes.
func (m *cpuMeter) report(b *testing.B, n int) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.SetBytes(int64(n))
	b.ReportMetric(float64(after.Mallocs-m.before.Mallocs)/float64(b.N)/(float64(n)/1024), "allocs/KB")
	b.ReportMetric(float64(n)*float64(b.N)/m.cpu.Seconds()/1e6, "cpu-MB/s")
}

// processCPU is the process's user and system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkDecode(b *testing.B) {
	tok := loadQwen(b)
	text, err := os.ReadFile("testdata/text/prose.txt")
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.encodeAll(string(text), false)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := tok.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadQwen3(b *testing.B) {
	for b.Loop() {
		if _, err := Load(qwenPath); err != nil {
			b.Fatal(err)
		}
	}
}
