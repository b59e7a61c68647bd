package token

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"testing"
)

func longText(i int) string {
	return fmt.Sprintf("text %d: ", i) + strings.Repeat(fmt.Sprintf("word%d ", i), MinSegment/4)
}

func TestSegmentCacheHitsAndBypass(t *testing.T) {
	c := NewSegmentCache(1 << 20)
	calls := 0
	enc := func(dst []uint32, text string) []uint32 { calls++; return AppendEncode(dst, text) }
	text := longText(1)
	for range 3 {
		if got := c.Append([]uint32{7}, text, enc); !slices.Equal(got, append([]uint32{7}, Encode(text)...)) {
			t.Fatalf("Append = %v, want 7 then the ids of the text", got)
		}
	}
	if calls != 1 {
		t.Fatalf("encoded %d times, want once", calls)
	}
	short := "short text"
	c.Append(nil, short, enc)
	c.Append(nil, short, enc)
	if calls != 3 {
		t.Fatalf("a text under MinSegment was cached: %d encodes, want 3", calls)
	}
	if st := c.Stats(); st.Hits != 2 || st.Misses != 1 || st.Entries != 1 || st.Bytes != int64(len(text)+4*len(Encode(text))) {
		t.Fatalf("stats %+v", st)
	}
}

// TestSegmentCacheComparesText: an entry stored under another text's hash (a collision)
// is not returned for that text, and the text's own ids replace it.
func TestSegmentCacheComparesText(t *testing.T) {
	c := NewSegmentCache(1 << 20)
	a, b := longText(1), longText(2)
	h := maphash.String(c.seed, a)
	c.put(&c.shards[h%segShards], h, b, Encode(b))
	if got := c.Append(nil, a, AppendEncode); !slices.Equal(got, Encode(a)) {
		t.Fatal("a colliding entry's ids were returned")
	}
	if got := c.Append(nil, a, func([]uint32, string) []uint32 { t.Fatal("not cached"); return nil }); !slices.Equal(got, Encode(a)) {
		t.Fatal("wrong ids after replacing the colliding entry")
	}
}

// TestSegmentCacheNearTwins: long texts of one length that differ in a single byte, as a
// conversation's turns that differ only in a number do, are each cached: a key that reads
// only part of a text would make them push each other out and miss at every turn.
func TestSegmentCacheNearTwins(t *testing.T) {
	c := NewSegmentCache(1 << 20)
	base := strings.Repeat("abcdefghij ", 400)
	var twins []string
	for i := range 40 {
		b := []byte(base)
		b[i*len(base)/40+7] = 'X'
		twins = append(twins, string(b))
	}
	for _, text := range twins {
		c.Append(nil, text, AppendEncode)
	}
	for i, text := range twins {
		got := c.Append(nil, text, func([]uint32, string) []uint32 {
			t.Fatalf("twin %d was not kept beside the others", i)
			return nil
		})
		if !slices.Equal(got, Encode(text)) {
			t.Fatalf("twin %d: another text's ids", i)
		}
	}
}

// TestSegmentCacheBounded: however many texts pass through, the cache holds at most its
// budget, keeps recently used entries, and skips entries too large for a shard.
func TestSegmentCacheBounded(t *testing.T) {
	const budget = 64 << 10
	c := NewSegmentCache(budget)
	hot := longText(0)
	for i := 1; i < 2000; i++ {
		c.Append(nil, longText(i), AppendEncode)
		c.Append(nil, hot, AppendEncode)
		if st := c.Stats(); st.Bytes > budget {
			t.Fatalf("after %d texts the cache holds %d bytes, over its budget of %d", i, st.Bytes, budget)
		}
	}
	before := c.Stats().Hits
	c.Append(nil, hot, AppendEncode)
	if c.Stats().Hits != before+1 {
		t.Fatal("the text used on every round was evicted")
	}
	huge := strings.Repeat("x ", budget)
	c.Append(nil, huge, AppendEncode)
	if st := c.Stats(); st.Bytes > budget {
		t.Fatalf("a huge text was cached: %d bytes", st.Bytes)
	}
}

func TestSegmentCacheConcurrent(t *testing.T) {
	c := NewSegmentCache(32 << 10)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				text := longText((i * (g + 1)) % 50)
				if got := c.Append(nil, text, AppendEncode); !slices.Equal(got, Encode(text)) {
					t.Errorf("wrong ids for text %d", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestStandinChatCacheIsExact: the stand-in's chat ids through its segment cache, cold
// and warm, are the ids of each message encoded from scratch.
func TestStandinChatCacheIsExact(t *testing.T) {
	var msgs []Message
	for i := range 20 {
		msgs = append(msgs, Message{Role: []string{"user", "assistant"}[i%2], Content: longText(1000 + i)})
		var want []uint32
		for _, m := range msgs {
			want = append(want, imStart)
			want = AppendEncode(want, m.Role)
			want = append(want, newline)
			want = AppendEncode(want, m.Content)
			want = append(want, imEnd)
		}
		for range 2 {
			if got := EncodeChat(msgs); !slices.Equal(got, want) {
				t.Fatalf("%d messages: cached chat ids differ", len(msgs))
			}
		}
		if got, err := (Standin{}).Encode(nil, msgs[i].Content, true); err != nil || !slices.Equal(got, Encode(msgs[i].Content)) {
			t.Fatalf("Standin.Encode differs from Encode (%v)", err)
		}
	}
}
