package monitor

import (
	"encoding/json"
	"fmt"
	"io"
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
func parseLoads(r io.Reader, at time.Time) ([]rankSample, error) {
	var body struct {
		Timestamp json.RawMessage `json:"timestamp"`
		Loads     []struct {
			Timestamp                json.RawMessage `json:"timestamp"`
			DPRank                   *int            `json:"dp_rank"`
			NumRunningReqs           *int64          `json:"num_running_reqs"`
			NumWaitingReqs           *int64          `json:"num_waiting_reqs"`
			NumWaitingUncachedTokens *int64          `json:"num_waiting_uncached_tokens"`
			NumUsedTokens            *int64          `json:"num_used_tokens"`
			NumTotalTokens           *int64          `json:"num_total_tokens"`
			MaxTotalNumTokens        *int64          `json:"max_total_num_tokens"`
			MaxRunningRequests       *int64          `json:"max_running_requests"`
		} `json:"loads"`
	}
	if err := json.NewDecoder(r).Decode(&body); err != nil {
		return nil, fmt.Errorf("decoding /v1/loads: %w", err)
	}
	if len(body.Loads) == 0 {
		return nil, fmt.Errorf("decoding /v1/loads: no loads")
	}
	out := make([]rankSample, 0, len(body.Loads))
	for i, l := range body.Loads {
		if l.NumRunningReqs == nil || l.NumWaitingReqs == nil {
			return nil, fmt.Errorf("decoding /v1/loads: rank %d lacks num_running_reqs or num_waiting_reqs", i)
		}
		s := rankSample{rank: orIndex(l.DPRank, i), stamp: string(l.Timestamp)}
		if s.stamp == "" {
			s.stamp = string(body.Timestamp)
		}
		s.At, s.Running, s.Waiting = at, *l.NumRunningReqs, *l.NumWaitingReqs
		if l.NumWaitingUncachedTokens != nil && l.NumUsedTokens != nil && l.MaxTotalNumTokens != nil && *l.MaxTotalNumTokens > 0 {
			s.Native = true
			s.WaitingUncachedTokens = *l.NumWaitingUncachedTokens
			s.UsedKVTokens = *l.NumUsedTokens
			// num_total_tokens is used plus pending prefill; older engines lack it.
			s.TotalKVTokens = s.UsedKVTokens + s.WaitingUncachedTokens
			if l.NumTotalTokens != nil {
				s.TotalKVTokens = *l.NumTotalTokens
			}
			s.MaxKVTokens = *l.MaxTotalNumTokens
			if l.MaxRunningRequests != nil {
				s.MaxRunning = *l.MaxRunningRequests
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// parseGetLoad decodes SGLang's older GET /get_load: an array with one object per rank,
// where num_reqs counts running and waiting requests together. These reports are basic.
func parseGetLoad(r io.Reader, at time.Time) ([]rankSample, error) {
	var ranks []struct {
		TsTic          json.RawMessage `json:"ts_tic"`
		DPRank         *int            `json:"dp_rank"`
		NumReqs        *int64          `json:"num_reqs"`
		NumWaitingReqs *int64          `json:"num_waiting_reqs"`
	}
	if err := json.NewDecoder(r).Decode(&ranks); err != nil {
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
