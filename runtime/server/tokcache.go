package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/token"
)

// tokenCacheCollector exports the counters of the token segment caches of the served
// models' tokenizers (see token.SegmentCache), one series per tokenizer: models sharing a
// tokenizer file share its cache, and every model on the stand-in vocabulary shares the
// stand-in's. Label values are configured tokenizer paths or "standin". It reads the
// current generation's models at every scrape, so a reload's tokenizers show at once.
type tokenCacheCollector struct {
	router *Server
}

var (
	tokenCacheHits = prometheus.NewDesc("router_token_cache_hits_total",
		"Long texts (message contents, text between special tokens) whose token ids came from the token cache.", []string{"tokenizer"}, nil)
	tokenCacheMisses = prometheus.NewDesc("router_token_cache_misses_total",
		"Long texts tokenized because the token cache did not hold them.", []string{"tokenizer"}, nil)
	tokenCacheBytes = prometheus.NewDesc("router_token_cache_bytes",
		"Bytes of texts and token ids the token cache holds.", []string{"tokenizer"}, nil)
)

// tokenCaches returns the served models' token caches by label value.
func tokenCaches(models map[string]*request.Model) map[string]token.CacheStatser {
	caches := map[string]token.CacheStatser{}
	for _, m := range models {
		cs, ok := m.Tok.(token.CacheStatser)
		if !ok {
			continue
		}
		name := "standin"
		if m.Plan.Tokenizer != nil {
			name = m.Plan.Tokenizer.Path
		}
		caches[name] = cs
	}
	return caches
}

func (c *tokenCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tokenCacheHits
	ch <- tokenCacheMisses
	ch <- tokenCacheBytes
}

func (c *tokenCacheCollector) Collect(ch chan<- prometheus.Metric) {
	gen := c.router.current()
	if gen == nil {
		return
	}
	for name, cs := range tokenCaches(gen.models.All()) {
		st := cs.CacheStats()
		ch <- prometheus.MustNewConstMetric(tokenCacheHits, prometheus.CounterValue, float64(st.Hits), name)
		ch <- prometheus.MustNewConstMetric(tokenCacheMisses, prometheus.CounterValue, float64(st.Misses), name)
		ch <- prometheus.MustNewConstMetric(tokenCacheBytes, prometheus.GaugeValue, float64(st.Bytes), name)
	}
}
