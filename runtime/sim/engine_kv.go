package sim

import (
	"fmt"
	"net/url"
)

// KVEncoding returns the encoding of the engine's KV events, or "" when they are off.
func (e *Engine) KVEncoding() string {
	if e.spec.KVEvents == nil {
		return ""
	}
	return e.spec.KVEvents.Encoding
}

// KVDials reports whether the engine's publishers dial a router rather than bind.
func (e *Engine) KVDials() bool { return e.spec.KVEvents != nil && e.spec.KVEvents.Dial }

// KVEndpoints returns the ZMQ endpoint of each DP rank's KV event publisher, or nil when
// KV events are off.
func (e *Engine) KVEndpoints() []string {
	if e.spec.KVEvents == nil {
		return nil
	}
	eps := make([]string, len(e.ranks))
	for i, k := range e.ranks {
		eps[i] = k.pub.endpoint
	}
	return eps
}

// KVReplayEndpoints returns the endpoint of each DP rank's replay socket, or nil when
// there is none.
func (e *Engine) KVReplayEndpoints() []string {
	if e.spec.KVEvents == nil || e.spec.KVEvents.ReplayEndpoint == "" {
		return nil
	}
	eps := make([]string, len(e.ranks))
	for i, k := range e.ranks {
		eps[i] = k.pub.replay.endpoint
	}
	return eps
}

// KVTopic returns the topic of the engine's KV events, or "" when they are off.
func (e *Engine) KVTopic() string {
	if e.spec.KVEvents == nil {
		return ""
	}
	return e.spec.KVEvents.Topic
}

// openPublishers binds one PUB socket per DP rank on consecutive ports, as SGLang does.
// With port 0 it retries, since the port after a free one may be taken (on a busy machine,
// by one of thousands of TIME_WAIT sockets).
func (e *Engine) openPublishers() ([]*publisher, error) {
	kv := e.spec.KVEvents
	if kv == nil {
		return nil, nil
	}
	ep0, err := rankEndpoint(kv.Endpoint, 0)
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", e.spec.ID, err)
	}
	attempts := 1
	if kv.Dial && hasZeroPort(ep0) {
		return nil, fmt.Errorf("engine %s: a publisher that dials needs the router's port, not 0", e.spec.ID)
	}
	if hasZeroPort(ep0) {
		attempts = 50
	}
	for range attempts {
		var pubs []*publisher
		if pubs, err = e.tryPublishers(kv); err == nil {
			return pubs, nil
		}
	}
	return nil, fmt.Errorf("engine %s: %w", e.spec.ID, err)
}

func (e *Engine) tryPublishers(kv *KVEventsSpec) ([]*publisher, error) {
	base := kv.Endpoint
	pubs := make([]*publisher, 0, e.spec.DPSize)
	for r := range e.spec.DPSize {
		ep, err := rankEndpoint(base, r)
		if err != nil {
			return nil, err
		}
		if kv.Dial {
			ep, err = dialEndpoint(base, r)
			if err != nil {
				return nil, err
			}
		}
		c := pubConfig{endpoint: ep, dial: kv.Dial, topic: kv.Topic, dpRank: r, blockSize: e.spec.Config.BlockSize,
			encoding: kv.Encoding, seed: e.spec.ID, drop: func() bool { return e.faults.Load().DropKVEvents }}
		if kv.ReplayEndpoint != "" {
			if c.replay, err = rankEndpoint(kv.ReplayEndpoint, r); err != nil {
				return nil, err
			}
		}
		p, err := newPublisher(c)
		if err != nil {
			for _, p := range pubs {
				p.close()
			}
			return nil, err
		}
		if r == 0 {
			base = p.endpoint // ranks 1.. follow the port rank 0 got
		}
		pubs = append(pubs, p)
	}
	return pubs, nil
}

func hasZeroPort(endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && u.Port() == "0"
}

func (e *Engine) closePublishers() {
	for _, k := range e.ranks {
		if k.pub != nil {
			k.pub.close()
		}
	}
}
