package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/engine"
)

// resilienceMetrics count timeouts, retries and breaker state; every label value is a
// fixed set (stages, phases) or from the config (models, engines).
type resilienceMetrics struct {
	timeouts *prometheus.CounterVec
	retries  *prometheus.CounterVec
}

func newResilienceMetrics(reg *prometheus.Registry) resilienceMetrics {
	m := resilienceMetrics{
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_timeouts_total", Help: "Dispatch deadlines that passed, by stage (plain, prefill, decode; client for a body read) and phase (connect, first_byte, stream_idle, total, prefill_status, body_read).",
		}, []string{"stage", "phase"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_retries_total", Help: "Requests dispatched again to another engine because the first was never received (connection refused, breaker open).",
		}, []string{"model"}),
	}
	reg.MustRegister(m.timeouts, m.retries)
	return m
}

// observeFailure counts a failed dispatch.
func (m *metrics) observeFailure(err *dispatch.Error) {
	if err.Kind == dispatch.Timeout {
		m.timeouts.WithLabelValues(string(err.Stage), err.Phase).Inc()
	}
}

// breakerCollectors are an engine's breaker gauges.
func (m *metrics) breakerCollectors(wk *engine.Worker) []prometheus.Collector {
	labels := prometheus.Labels{"engine": wk.ID()}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "router_engine_breaker_state", Help: "The engine's circuit breaker: 0 closed, 1 open, 2 half-open.", ConstLabels: labels,
		}, func() float64 {
			if b := wk.Breaker(); b != nil {
				return float64(b.State())
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "router_engine_breaker_trips_total", Help: "Times the engine's circuit breaker opened.", ConstLabels: labels,
		}, func() float64 {
			if b := wk.Breaker(); b != nil {
				return float64(b.Trips())
			}
			return 0
		}),
	}
}

// breakerState names an engine's breaker state for /admin/state.
func breakerState(w *engine.Worker) string {
	if b := w.Breaker(); b != nil {
		return b.State().String()
	}
	return engine.BreakerClosed.String()
}
