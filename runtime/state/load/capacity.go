package load

// KVCapacity returns the KV cache capacity in tokens the engine last reported, summed
// over its ranks (SGLang's max_total_num_tokens, vLLM's num_gpu_blocks × block_size), or 0
// when it has reported none. Unlike load, a capacity does not go stale: it changes only
// when the engine restarts with other settings, and its next report says so.
func (t *Table) KVCapacity(engineID string) int64 {
	if t == nil {
		return 0
	}
	sl := t.members.Load().byID[engineID]
	if sl == nil {
		return 0
	}
	r := sl.report.Load()
	if r == nil || !(r.Native || r.KVKnown) {
		return 0
	}
	return max(r.MaxKVTokens, 0)
}
