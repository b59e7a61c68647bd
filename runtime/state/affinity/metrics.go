package affinity

import "github.com/prometheus/client_golang/prometheus"

var (
	descStoreUp = prometheus.NewDesc("router_bindings_store_up",
		"1 while session and sticky bindings go to the binding store, 0 while this replica routes with its local bindings because the store is down.", []string{"store"}, nil)
	descStoreErrors = prometheus.NewDesc("router_bindings_store_errors_total",
		"Binding-store operations and probes that failed or timed out.", []string{"store"}, nil)
	descLocalOps = prometheus.NewDesc("router_bindings_local_ops_total",
		"Binding operations answered from this replica's local bindings because the shared store was down or the operation failed.", []string{"store"}, nil)
	descStoreDowns = prometheus.NewDesc("router_bindings_store_downs_total",
		"Changes of the binding store from up to down, each after bindings.failures_to_down failed operations in a row.", []string{"store"}, nil)
	descBindings = prometheus.NewDesc("router_bindings_local",
		"Bindings held in this replica's memory (with a shared store, its local copy), expired but unswept ones included.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Stores) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreUp, descStoreErrors, descLocalOps, descStoreDowns, descBindings} {
		ch <- d
	}
}

// Collect implements prometheus.Collector, so serve can register the binding store's
// health with the router's metrics: a replica on local bindings shows at once.
func (s *Stores) Collect(ch chan<- prometheus.Metric) {
	st := s.Status()
	up := 0.0
	if st.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, up, st.Store)
	ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(st.Errors), st.Store)
	ch <- prometheus.MustNewConstMetric(descLocalOps, prometheus.CounterValue, float64(st.LocalOps), st.Store)
	ch <- prometheus.MustNewConstMetric(descStoreDowns, prometheus.CounterValue, float64(st.Downs), st.Store)
	n := 0
	for _, m := range s.models {
		n += m.sessionLocal.Len() + m.stickyLocal.Len()
	}
	ch <- prometheus.MustNewConstMetric(descBindings, prometheus.GaugeValue, float64(n))
}
