package sim

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the performance model of one engine. Every data-parallel rank of the
// engine has these numbers on its own. Durations are simulated engine time; TimeScale maps
// them to wall-clock time.
type Config struct {
	// MaxRunningRequests caps the continuous batch; further requests wait in FIFO order.
	MaxRunningRequests int
	// MaxPrefillTokens caps the uncached input tokens of one prefill batch (SGLang's
	// max_prefill_tokens); a single longer request still runs alone.
	MaxPrefillTokens int
	// KVCapacityTokens is the KV pool size (SGLang's max_total_num_tokens). A request is
	// admitted only when its uncached input plus its whole output budget fits, after
	// evicting unused cached blocks.
	KVCapacityTokens int
	// ContextLength bounds input plus output tokens of one request.
	ContextLength int
	// BlockSize is the page size in tokens: the unit of prefix caching and of KV events.
	BlockSize int
	// OutputTokens is how many tokens a request generates unless its max_tokens is lower.
	OutputTokens int

	// PrefillOverhead is the fixed cost of one prefill batch.
	PrefillOverhead time.Duration
	// PrefillPerToken is the cost of each uncached input token; cached tokens are free.
	PrefillPerToken time.Duration
	// DecodePerToken is the time of one decode step with a single running request.
	DecodePerToken time.Duration
	// DecodeBatchFactor slows a decode step by this fraction per additional running
	// request: a step takes DecodePerToken * (1 + DecodeBatchFactor*(running-1)).
	DecodeBatchFactor float64
	// TransferPerToken is the cost, on a decode engine, of receiving each input token's KV
	// from its prefill peer; it replaces prefill there.
	TransferPerToken time.Duration

	// TimeScale multiplies every simulated duration before the engine sleeps it: 1 is real
	// time, 0.01 runs a hundred times faster, 0 does not sleep at all.
	TimeScale float64
	// BootstrapTimeout bounds, in wall-clock time, how long a decode engine waits for the
	// prefill of its bootstrap room when the prefill peer runs in the same process.
	BootstrapTimeout time.Duration
}

// DefaultConfig returns a model of a mid-sized model on one modern GPU, in real time.
func DefaultConfig() Config {
	return Config{
		MaxRunningRequests: 32,
		MaxPrefillTokens:   16384,
		KVCapacityTokens:   131072,
		ContextLength:      32768,
		BlockSize:          16,
		OutputTokens:       64,
		PrefillOverhead:    5 * time.Millisecond,
		PrefillPerToken:    50 * time.Microsecond,
		DecodePerToken:     10 * time.Millisecond,
		DecodeBatchFactor:  0.02,
		TransferPerToken:   2 * time.Microsecond,
		TimeScale:          1,
		BootstrapTimeout:   10 * time.Second,
	}
}

// Validate reports the first setting that cannot run.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"max_running_requests", c.MaxRunningRequests},
		{"max_prefill_tokens", c.MaxPrefillTokens},
		{"kv_capacity_tokens", c.KVCapacityTokens},
		{"context_length", c.ContextLength},
		{"block_size", c.BlockSize},
		{"output_tokens", c.OutputTokens},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.KVCapacityTokens < c.ContextLength {
		// Otherwise a valid request could never be admitted and would block the queue.
		return fmt.Errorf("kv_capacity_tokens (%d) must be at least context_length (%d)", c.KVCapacityTokens, c.ContextLength)
	}
	if c.PrefillOverhead < 0 || c.PrefillPerToken < 0 || c.DecodePerToken < 0 || c.TransferPerToken < 0 || c.BootstrapTimeout < 0 {
		return errors.New("durations must not be negative")
	}
	if c.DecodeBatchFactor < 0 || c.TimeScale < 0 {
		return errors.New("decode_batch_factor and time_scale must not be negative")
	}
	return nil
}
