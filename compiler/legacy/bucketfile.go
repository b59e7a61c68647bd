package legacy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"
)

// bucketFile is sgl-router's --bucket-config JSON (reference/sglang-router.md §1.5). Its
// buckets are per stage: a prefill spec and a decode spec are independent membership
// sets, which the target only knows as complete prefill/decode buckets.
type bucketFile struct {
	name          string       // the file, for messages
	TTFTSLOPolicy *string      `json:"ttft_slo_policy"`
	TPSSLOPolicy  *string      `json:"tps_slo_policy"`
	Buckets       []bucketSpec `json:"buckets"`
}

// bucketSpec is one legacy per-stage bucket. Optional fields are nil when absent or null.
type bucketSpec struct {
	ID                      *string   `json:"id"`
	Stage                   *string   `json:"stage"`
	Rank                    *uint32   `json:"rank"`
	WorkerIDs               *[]string `json:"worker_ids"`
	MinExtendTokens         *uint64   `json:"min_extend_tokens"`
	MaxExtendTokens         *uint64   `json:"max_extend_tokens"`
	MinSequenceTokens       *uint64   `json:"min_sequence_tokens"`
	MaxSequenceTokens       *uint64   `json:"max_sequence_tokens"`
	MaxContextTokens        *uint64   `json:"max_context_tokens"`
	TTFTP95AtCapacityMS     *uint64   `json:"ttft_p95_at_capacity_ms"`
	TPSP05AtCapacity        *float64  `json:"tps_p05_at_capacity"`
	MaxPendingPrefillTokens *uint64   `json:"max_pending_prefill_tokens"`
}

const (
	stagePrefill = "prefill"
	stageDecode  = "decode"
)

// parseBucketFile decodes a legacy bucket file as strictly as sgl-router did: unknown
// fields and trailing data are errors.
func parseBucketFile(name string, data []byte) (*bucketFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	f := &bucketFile{name: name}
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("--bucket-config %s is not valid bucket JSON: %v", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("--bucket-config %s is not valid bucket JSON: data after the top-level object", name)
	}
	return f, nil
}

// legacyRules applies sgl-router's validation of a bucket file, so a file it refused is
// refused here too. Each spec it returns has every required field.
func (f *bucketFile) legacyRules() Errors {
	var p Errors
	for _, policy := range []*string{f.TTFTSLOPolicy, f.TPSSLOPolicy} {
		if policy != nil && *policy != "disabled" && *policy != "best_effort" && *policy != "slo_first" {
			p.addf("%s: unknown SLO policy %q: possible values are disabled, best_effort, slo_first", f.name, *policy)
		}
	}
	if f.Buckets == nil {
		p.addf("%s: missing field buckets", f.name)
	}
	ids := map[string]bool{}
	ranks := map[string]map[uint32]string{stagePrefill: {}, stageDecode: {}}
	members := map[string]map[string]string{stagePrefill: {}, stageDecode: {}}
	prefills := 0
	for i, b := range f.Buckets {
		at := fmt.Sprintf("%s: bucket %d", f.name, i)
		if b.ID != nil {
			at = fmt.Sprintf("%s: bucket %q", f.name, *b.ID)
		}
		if !b.required(&p, at) {
			continue
		}
		id, stage := *b.ID, *b.Stage
		p.check(id != "", "%s: bucket ids must not be empty", at)
		p.check(!ids[id], "%s: duplicate bucket id", at)
		ids[id] = true
		if other, dup := ranks[stage][*b.Rank]; dup {
			p.addf("%s: rank %d is also the rank of %s bucket %q: ranks are unique per stage", at, *b.Rank, stage, other)
		}
		ranks[stage][*b.Rank] = id
		for _, w := range *b.WorkerIDs {
			if other, dup := members[stage][normalizeURL(w)]; dup {
				p.addf("%s: worker %s is also in %s bucket %q: a worker is in at most one bucket per stage", at, w, stage, other)
			}
			members[stage][normalizeURL(w)] = id
		}
		b.stageRules(&p, at)
		if stage == stagePrefill {
			prefills++
		}
	}
	p.check(f.Buckets == nil || prefills > 0, "%s: no prefill bucket: a bucket file needs at least one", f.name)
	return p
}

// required checks the fields every spec must have; false when one is missing.
func (b *bucketSpec) required(p *Errors, at string) bool {
	ok := true
	missing := func(present bool, field string) {
		if !present {
			p.addf("%s: missing field %s", at, field)
			ok = false
		}
	}
	missing(b.ID != nil, "id")
	missing(b.Stage != nil, "stage")
	missing(b.Rank != nil, "rank")
	missing(b.WorkerIDs != nil, "worker_ids")
	if b.Stage != nil && *b.Stage != stagePrefill && *b.Stage != stageDecode {
		p.addf("%s: unknown stage %q: possible values are prefill, decode", at, *b.Stage)
		ok = false
	}
	return ok
}

// stageRules rejects fields that belong to the other stage, and empty ranges.
func (b *bucketSpec) stageRules(p *Errors, at string) {
	type field struct {
		name string
		set  bool
	}
	foreign := []field{
		{"min_sequence_tokens", b.MinSequenceTokens != nil},
		{"max_sequence_tokens", b.MaxSequenceTokens != nil},
		{"tps_p05_at_capacity", b.TPSP05AtCapacity != nil},
	}
	if *b.Stage == stageDecode {
		foreign = []field{
			{"min_extend_tokens", b.MinExtendTokens != nil},
			{"max_extend_tokens", b.MaxExtendTokens != nil},
			{"ttft_p95_at_capacity_ms", b.TTFTP95AtCapacityMS != nil},
			{"max_pending_prefill_tokens", b.MaxPendingPrefillTokens != nil},
		}
	}
	for _, f := range foreign {
		p.check(!f.set, "%s: %s is not a %s bucket field", at, f.name, *b.Stage)
	}
	if b.MinExtendTokens != nil && b.MaxExtendTokens != nil {
		p.check(*b.MinExtendTokens <= *b.MaxExtendTokens, "%s: min_extend_tokens (%d) is greater than max_extend_tokens (%d)", at, *b.MinExtendTokens, *b.MaxExtendTokens)
	}
	if b.MinSequenceTokens != nil && b.MaxSequenceTokens != nil {
		p.check(*b.MinSequenceTokens <= *b.MaxSequenceTokens, "%s: min_sequence_tokens (%d) is greater than max_sequence_tokens (%d)", at, *b.MinSequenceTokens, *b.MaxSequenceTokens)
	}
}

// targetRules rejects what the file says that a bucket of the configuration cannot: SLO
// estimates that are not positive, and the decode stage's range over expected peak
// sequence length.
func (f *bucketFile) targetRules() Errors {
	var p Errors
	for _, b := range f.Buckets {
		at := fmt.Sprintf("%s: bucket %q", f.name, *b.ID)
		p.check(!strings.ContainsFunc(*b.ID, unicode.IsControl), "%s: the id contains a control character, which the migrated configuration's comments cannot quote: rename the bucket", at)
		// The configuration's integers are int64; sgl-router's token fields were u64.
		for _, n := range []struct {
			field string
			value *uint64
		}{
			{"min_extend_tokens", b.MinExtendTokens},
			{"max_extend_tokens", b.MaxExtendTokens},
			{"max_context_tokens", b.MaxContextTokens},
			{"max_pending_prefill_tokens", b.MaxPendingPrefillTokens},
			{"ttft_p95_at_capacity_ms", b.TTFTP95AtCapacityMS},
		} {
			if n.value != nil && *n.value > math.MaxInt64 {
				p.addf("%s: %s %d cannot be migrated: the configuration's integers are at most %d", at, n.field, *n.value, int64(math.MaxInt64))
			}
		}
		// sgl-router compared a 0 ms TTFT as meeting every target and a throughput of 0 or
		// less as meeting none; a configured estimate is positive.
		p.check(b.TTFTP95AtCapacityMS == nil || *b.TTFTP95AtCapacityMS > 0, "%s: ttft_p95_at_capacity_ms 0 cannot be migrated: an estimate must be positive, and 0 claimed every TTFT target met; give the bucket's measured p95 or remove it", at)
		p.check(b.TPSP05AtCapacity == nil || *b.TPSP05AtCapacity > 0, "%s: tps_p05_at_capacity %v cannot be migrated: an estimate must be positive; give the bucket's measured p05 or remove it", at, deref(b.TPSP05AtCapacity))
		p.check(b.MinSequenceTokens == nil && b.MaxSequenceTokens == nil,
			"%s: min_sequence_tokens/max_sequence_tokens cannot become a bucket range: a bucket selects by input length and by max_context_tokens over input plus requested output, and sgl-router's decode range over the expected peak also excluded requests with no output budget; remove them, or bound the peak with max_context_tokens", at)
		p.check(b.MaxContextTokens == nil || *b.MaxContextTokens > 0, "%s: max_context_tokens 0 cannot be migrated: a bucket's context capacity must be positive", at)
		p.check(b.MaxPendingPrefillTokens == nil || *b.MaxPendingPrefillTokens > 0, "%s: max_pending_prefill_tokens 0 cannot be migrated: admission caps must be positive", at)
	}
	return p
}

// specs returns the file's specs of one stage, in file order.
func (f *bucketFile) specs(stage string) []*bucketSpec {
	var out []*bucketSpec
	for i := range f.Buckets {
		if *f.Buckets[i].Stage == stage {
			out = append(out, &f.Buckets[i])
		}
	}
	return out
}

// deref is *v, or 0 when v is nil, for messages whose condition guards the nil case.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}
