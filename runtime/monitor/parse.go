package monitor

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/routerkit/router/runtime/state/load"
)

// rankSample is one data-parallel rank's sample as an engine reported it.
type rankSample struct {
	rank int
	// stamp is the engine's own timestamp of the rank's report, as raw JSON, or "" when
	// it gives none. A stamp that does not change between polls means a frozen report.
	stamp string
	load.Sample
}

// parseLoads decodes SGLang's GET /v1/loads. A rank is native when it carries the waiting
// uncached tokens and a KV capacity; otherwise it is basic (running and waiting only).
// Unknown fields are ignored so newer engines keep working.
func parseLoads(b []byte, at time.Time) ([]rankSample, error) {
	timestamp, loads, err := decodeLoads(b)
	if err != nil {
		return nil, fmt.Errorf("decoding /v1/loads: %w", err)
	}
	if len(loads) == 0 {
		return nil, fmt.Errorf("decoding /v1/loads: no loads")
	}
	out := make([]rankSample, 0, len(loads))
	for i := range loads {
		l := &loads[i]
		if !l.has[fRunning] || !l.has[fWaiting] {
			return nil, fmt.Errorf("decoding /v1/loads: rank %d lacks num_running_reqs or num_waiting_reqs", i)
		}
		s := rankSample{rank: i, stamp: string(l.timestamp)}
		if l.has[fDPRank] {
			s.rank = int(l.v[fDPRank])
		}
		if l.timestamp == nil {
			s.stamp = string(timestamp)
		}
		s.At, s.Running, s.Waiting = at, l.v[fRunning], l.v[fWaiting]
		if l.has[fWaitingUncached] && l.has[fUsed] && l.has[fMaxTotal] && l.v[fMaxTotal] > 0 {
			s.Native = true
			s.WaitingUncachedTokens = l.v[fWaitingUncached]
			s.UsedKVTokens = l.v[fUsed]
			// num_total_tokens is used plus pending prefill; older engines lack it.
			s.TotalKVTokens = s.UsedKVTokens + s.WaitingUncachedTokens
			if l.has[fTotal] {
				s.TotalKVTokens = l.v[fTotal]
			}
			s.MaxKVTokens = l.v[fMaxTotal]
			if l.has[fMaxRunning] {
				s.MaxRunning = l.v[fMaxRunning]
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// parseGetLoad decodes SGLang's older GET /get_load: an array with one object per rank,
// where num_reqs counts running and waiting requests together. These reports are basic.
func parseGetLoad(b []byte, at time.Time) ([]rankSample, error) {
	var ranks []struct {
		TsTic          json.RawMessage `json:"ts_tic"`
		DPRank         *int            `json:"dp_rank"`
		NumReqs        *int64          `json:"num_reqs"`
		NumWaitingReqs *int64          `json:"num_waiting_reqs"`
	}
	if err := json.Unmarshal(b, &ranks); err != nil {
		return nil, fmt.Errorf("decoding /get_load: %w", err)
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("decoding /get_load: no ranks")
	}
	out := make([]rankSample, 0, len(ranks))
	for i, l := range ranks {
		if l.NumReqs == nil || l.NumWaitingReqs == nil {
			return nil, fmt.Errorf("decoding /get_load: rank %d lacks num_reqs or num_waiting_reqs", i)
		}
		s := rankSample{rank: orIndex(l.DPRank, i), stamp: string(l.TsTic)}
		s.At, s.Running, s.Waiting = at, max(*l.NumReqs-*l.NumWaitingReqs, 0), *l.NumWaitingReqs
		out = append(out, s)
	}
	return out, nil
}

func orIndex(rank *int, i int) int {
	if rank != nil {
		return *rank
	}
	return i
}
