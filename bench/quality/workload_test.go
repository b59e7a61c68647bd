package quality

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func smallShape() Shape {
	return Shape{Requests: 30, OutputTokens: 4, Documents: 3, DocumentWords: 50, QuestionWords: 5, Conversations: 2, Turns: 3, ContextWords: 20}
}

func TestGenerateIsDeterministic(t *testing.T) {
	for _, wl := range Workloads {
		a, err := Generate(wl, smallShape(), 7)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Generate(wl, smallShape(), 7)
		c, _ := Generate(wl, smallShape(), 8)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: same seed, different requests", wl)
		}
		if reflect.DeepEqual(a, c) {
			t.Errorf("%s: different seeds, same requests", wl)
		}
	}
}

func TestGenerateUnknown(t *testing.T) {
	if _, err := Generate("nope", smallShape(), 1); err == nil || !strings.Contains(err.Error(), "unknown workload") {
		t.Fatalf("got %v", err)
	}
}

func TestDocumentsShareFewDocuments(t *testing.T) {
	reqs, _ := Generate("shared_documents", smallShape(), 1)
	docs := map[string]int{}
	for _, r := range reqs {
		docs[r.Messages[0].Content]++
	}
	if len(docs) > 3 || len(docs) < 2 {
		t.Fatalf("%d distinct documents over %d requests, want 2..3", len(docs), len(reqs))
	}
}

func TestConversationsResendHistoryInOrder(t *testing.T) {
	reqs, _ := Generate("multi_turn", smallShape(), 1)
	if len(reqs) != 6 {
		t.Fatalf("%d turns, want 2 conversations of 3", len(reqs))
	}
	last := map[string]Request{}
	for _, r := range reqs {
		p, seen := last[r.Conv]
		if r.Turn != len(p.Messages)/2 && seen || !seen && r.Turn != 0 {
			t.Fatalf("conversation %s: turn %d out of order", r.Conv, r.Turn)
		}
		if seen {
			// The previous turn's messages, then its answer, then the new question.
			if !reflect.DeepEqual(r.Messages[:len(p.Messages)], p.Messages) {
				t.Fatalf("turn %d does not resend the history", r.Turn)
			}
			if a := r.Messages[len(p.Messages)]; a.Role != "assistant" || a.Content != Reply(4) {
				t.Fatalf("turn %d: answer %+v", r.Turn, a)
			}
		}
		last[r.Conv] = r
	}
}

func TestUniquePromptsShareNoPrefix(t *testing.T) {
	reqs, _ := Generate("no_reuse", smallShape(), 1)
	seen := map[string]bool{}
	for _, r := range reqs {
		w := strings.Fields(r.Messages[0].Content)[0] + strings.Fields(r.Messages[0].Content)[1]
		if seen[w] {
			t.Fatalf("two prompts start with %q", w)
		}
		seen[w] = true
	}
}

func TestMixHasEveryClass(t *testing.T) {
	reqs, _ := Generate("mix", smallShape(), 1)
	classes := map[string]int{}
	for _, r := range reqs {
		classes[r.Class]++
	}
	if classes["documents"] != 10 || classes["conversations"] != 6 || classes["unique"] != 10 {
		t.Fatalf("classes %v", classes)
	}
}

func TestReplyMatchesTheSimulatorVocabulary(t *testing.T) {
	if got := Reply(3); got != "lorem ipsum dolor " {
		t.Fatalf("Reply(3) = %q", got)
	}
}

func TestScheduleRate(t *testing.T) {
	reqs := make([]Request, 2000)
	Schedule(reqs, 100, 1)
	for i := 1; i < len(reqs); i++ {
		if reqs[i].At < reqs[i-1].At {
			t.Fatal("arrivals out of order")
		}
	}
	// 2000 arrivals at 100/s span about 20 s; the bound is loose (many standard deviations).
	if span := reqs[len(reqs)-1].At; span < 17*time.Second || span > 23*time.Second {
		t.Fatalf("span %v, want about 20s", span)
	}
}

func TestRateScalesWithEnginesAndUtilisation(t *testing.T) {
	reqs := []Request{{PromptWords: 1000, MaxTokens: 16}}
	cfg := EngineConfig(1)
	r1 := Rate(reqs, cfg, 4, 0.5)
	if r2 := Rate(reqs, cfg, 8, 0.5); r2 < 1.99*r1 || r2 > 2.01*r1 {
		t.Fatalf("8 engines: %v, 4 engines: %v", r2, r1)
	}
	if r3 := Rate(reqs, EngineConfig(0.5), 4, 0.5); r3 < 1.99*r1 || r3 > 2.01*r1 {
		t.Fatalf("half time scale: %v, want twice %v", r3, r1)
	}
}
