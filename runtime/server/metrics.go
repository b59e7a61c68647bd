package server

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
)

// metrics are the router's Prometheus series. They are also the source of the counters
// in /admin/state, so the two never disagree.
//
// Every label value comes from the config (model, bucket, engine, stage, policy) or from a
// fixed set in the code (status, error codes, admission limits): a value a client chooses,
// such as an unknown model name, would make a new series per request and grow memory and
// /metrics without bound. Free-text reasons stay in logs, decisions and explain.
type metrics struct {
	reg *prometheus.Registry
	// models is the served models, replaced whole on a reload.
	models atomic.Pointer[map[string]bool]
	resilienceMetrics
	requests      *prometheus.CounterVec
	picks         *prometheus.CounterVec
	rejections    *prometheus.CounterVec
	fallthroughs  *prometheus.CounterVec
	streamFails   *prometheus.CounterVec
	sloSelections *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	ttft          *prometheus.HistogramVec

	// The series every request touches, found without WithLabelValues (see seriesCache).
	byModel    atomic.Pointer[map[string]modelSeries] // replaced whole with models
	requestsBy seriesCache[prometheus.Counter]
	picksBy    seriesCache[prometheus.Counter]
}

// modelSeries are a model's latency histograms.
type modelSeries struct {
	duration, ttft prometheus.Observer
}

// unknownModel labels requests for a model the config does not serve.
const unknownModel = "unknown"

func newMetrics(models []string) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_requests_total", Help: "Chat requests by model, selected bucket (none when selection failed) and HTTP status.",
		}, []string{"model", "bucket", "status"}),
		picks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_picks_total", Help: "Engines picked by complete selections, by bucket, stage and policy.",
		}, []string{"model", "bucket", "stage", "policy", "engine"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_admission_rejections_total", Help: "Admission rejections by engine and the cap that rejected.",
		}, []string{"engine", "limit"}),
		fallthroughs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_bucket_fallthroughs_total", Help: "Bucket attempts that failed and passed the request to the next compatible bucket.",
		}, []string{"model", "bucket"}),
		streamFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_stream_failures_total", Help: "Streams that an engine failure ended after their 200, by code (engine_error, prefill_error).",
		}, []string{"model", "bucket", "code"}),
		sloSelections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_slo_selections_total", Help: "Selections of requests with an SLO target, by bucket, target (ttft, tps) and whether the bucket's estimate met it.",
		}, []string{"model", "bucket", "target", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "router_request_duration_seconds", Help: "Time from request arrival to the end of the response.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"model"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "router_time_to_first_token_seconds", Help: "Time from request arrival to the first response byte of a successful request.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"model"}),
	}
	m.requestsBy.create = func(k seriesKey) prometheus.Counter {
		return m.requests.WithLabelValues(k.a, k.b, statusLabel(k.n))
	}
	m.picksBy.create = func(k seriesKey) prometheus.Counter {
		return m.picks.WithLabelValues(k.a, k.b, k.c, k.d, k.e)
	}
	m.setModels(models)
	m.resilienceMetrics = newResilienceMetrics(m.reg)
	m.reg.MustRegister(m.requests, m.picks, m.rejections, m.fallthroughs, m.streamFails, m.sloSelections, m.duration, m.ttft,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// setModels records the served models, whose names label series; others are "unknown".
func (m *metrics) setModels(models []string) {
	set := make(map[string]bool, len(models))
	for _, name := range models {
		set[name] = true
	}
	series := make(map[string]modelSeries, len(models))
	for _, name := range models {
		series[name] = modelSeries{duration: m.duration.WithLabelValues(name), ttft: m.ttft.WithLabelValues(name)}
	}
	m.byModel.Store(&series)
	m.models.Store(&set)
}

// registerEngine adds a member engine's gauges, read live from its worker and the load
// table, and records them on the member so that forgetEngine can take them away.
func (m *metrics) registerEngine(c *Server, mb *member) {
	w := mb.worker
	labels := prometheus.Labels{"engine": w.ID()}
	mb.collectors = []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "router_engine_inflight", Help: "Requests the router has dispatched to the engine and not yet finished.", ConstLabels: labels,
		}, func() float64 { return float64(w.Inflight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "router_engine_healthy", Help: "1 when the engine passes health checks, else 0.", ConstLabels: labels,
		}, func() float64 { return boolFloat(w.Healthy()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "router_engine_report_age_seconds", Help: "Age of the engine's last complete load report; -1 when it has none or it is stale.", ConstLabels: labels,
		}, func() float64 { return c.reportAge(w).Seconds() }),
	}
	mb.collectors = append(mb.collectors, m.breakerCollectors(w)...)
	m.reg.MustRegister(mb.collectors...)
}

// forgetEngine deletes every series of an engine that left, so that engines coming and
// going do not grow /metrics.
func (m *metrics) forgetEngine(mb *member) {
	for _, col := range mb.collectors {
		m.reg.Unregister(col)
	}
	mb.collectors = nil
	match := prometheus.Labels{"engine": mb.worker.ID()}
	m.picks.DeletePartialMatch(match)
	m.picksBy.reset()
	m.rejections.DeletePartialMatch(match)
}

// forgetModel deletes the series of a model a reload stopped serving.
func (m *metrics) forgetModel(model string) {
	match := prometheus.Labels{"model": model}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.requests, m.picks, m.fallthroughs, m.streamFails, m.sloSelections, m.duration, m.ttft, m.retries,
	} {
		v.DeletePartialMatch(match)
	}
	m.requestsBy.reset()
	m.picksBy.reset()
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observeSelection counts what the selection pass did: every failed attempt is a
// fall-through, every rejecting admission verdict a rejection, and a complete selection's
// picks.
func (m *metrics) observeSelection(model string, t *decision.Trace, sel bucket.Selection, err error) {
	for i, a := range t.Attempts {
		for _, g := range a.Groups {
			for _, v := range g.Admission {
				if !v.Admitted {
					m.rejections.WithLabelValues(v.Engine, v.Limit).Inc()
				}
			}
		}
		// Route only moves past a failed attempt when it may advance, so every failed
		// attempt but the last passed the request on.
		if a.Error != "" && i < len(t.Attempts)-1 {
			m.fallthroughs.WithLabelValues(model, a.Bucket).Inc()
		}
	}
	if err != nil || len(t.Attempts) == 0 {
		return
	}
	last := t.Attempts[len(t.Attempts)-1]
	for _, o := range [...]struct{ target, outcome string }{{bucket.TargetTTFT, sel.SLOTTFT}, {bucket.TargetTPS, sel.SLOTPS}} {
		if o.outcome != bucket.SLONone {
			m.sloSelections.WithLabelValues(model, last.Bucket, o.target, o.outcome).Inc()
		}
	}
	picks, n := selectionPicks(sel)
	for _, g := range last.Groups {
		for _, sp := range picks[:n] {
			if sp.stage == g.Stage {
				m.picksBy.get(seriesKey{a: model, b: last.Bucket, c: string(g.Stage), d: string(g.Policy), e: sp.pick.Engine.ID()}).Inc()
			}
		}
	}
}

// observeRequest counts a finished request and its latency, elapsed since it arrived.
func (m *metrics) observeRequest(d *record, rec *recorder, elapsed time.Duration) {
	bucketLabel := d.Bucket
	if bucketLabel == "" {
		bucketLabel = "none"
	}
	model := d.Model
	if !(*m.models.Load())[model] {
		model = unknownModel
	}
	m.requestsBy.get(seriesKey{a: model, b: bucketLabel, n: d.Status}).Inc()
	if rec.failureCode != "" {
		m.streamFails.WithLabelValues(model, bucketLabel, rec.failureCode).Inc()
	}
	series, ok := (*m.byModel.Load())[model]
	if !ok { // the unknown model's series appear with its first request
		series = modelSeries{duration: m.duration.WithLabelValues(model), ttft: m.ttft.WithLabelValues(model)}
	}
	series.duration.Observe(elapsed.Seconds())
	if d.Status == http.StatusOK && !rec.firstByte.IsZero() {
		series.ttft.Observe(rec.firstByte.Sub(rec.start).Seconds())
	}
}

// seriesKey is a series' label values; n is a numeric label (the status), kept as a
// number so that the key is built without formatting it.
type seriesKey struct {
	a, b, c, d, e string
	n             int
}

// seriesCache keeps a vector's children by label values, so that the request path finds
// its series with one map read, without WithLabelValues' hashing and the allocation of
// its variadic arguments. Its keys are label values, which come from the config and
// fixed sets, so it is bounded as the series are. A child deleted from its vector would
// stay here and count into nothing: code that deletes series must drop the cache too.
type seriesCache[T any] struct {
	mu     sync.RWMutex
	m      map[seriesKey]T
	create func(seriesKey) T
}

// reset drops every cached child, after series were deleted from the vector.
func (c *seriesCache[T]) reset() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

func (c *seriesCache[T]) get(k seriesKey) T {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = map[seriesKey]T{}
	}
	v = c.create(k)
	c.m[k] = v
	return v
}

// reportAge is the age of the engine's usable load report, or -1s when it has none.
func (c *Server) reportAge(w *engine.Worker) time.Duration {
	if r := c.table.LoadAt(w, c.table.Now()); r != nil {
		return time.Since(r.At)
	}
	return -time.Second
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func statusLabel(status int) string { return strconv.Itoa(status) }
