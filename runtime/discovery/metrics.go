package discovery

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes every source's status as Prometheus series, labelled by source id: a
// fixed set from the configuration, so the series are bounded.
func (d *Discovery) Collector() prometheus.Collector { return collector{d} }

var (
	descLookups = prometheus.NewDesc("router_dns_lookups_total",
		"DNS discovery resolutions by source and result: ok, empty (no such name or no records) or failed (the set was kept).",
		[]string{"source", "result"}, nil)
	descEngines = prometheus.NewDesc("router_dns_engines",
		"Engines a DNS source has in service, by state: serving or draining.",
		[]string{"source", "state"}, nil)
	descLeftOut = prometheus.NewDesc("router_dns_left_out",
		"Addresses the last answer listed over the source's max_engines, left out.",
		[]string{"source"}, nil)
	descFailures = prometheus.NewDesc("router_dns_consecutive_failures",
		"Consecutive failed lookups of a source; its last set stays meanwhile.",
		[]string{"source"}, nil)
	descLastSuccess = prometheus.NewDesc("router_dns_last_success_timestamp_seconds",
		"When a source's last applied answer arrived (Unix seconds); 0 before the first.",
		[]string{"source"}, nil)
)

type collector struct{ d *Discovery }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLookups, descEngines, descLeftOut, descFailures, descLastSuccess} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.d.Status() {
		ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(st.Lookups.OK), st.ID, "ok")
		ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(st.Lookups.Empty), st.ID, "empty")
		ch <- prometheus.MustNewConstMetric(descLookups, prometheus.CounterValue, float64(st.Lookups.Failed), st.ID, "failed")
		ch <- prometheus.MustNewConstMetric(descEngines, prometheus.GaugeValue, float64(len(st.Engines)), st.ID, "serving")
		ch <- prometheus.MustNewConstMetric(descEngines, prometheus.GaugeValue, float64(len(st.Draining)), st.ID, "draining")
		ch <- prometheus.MustNewConstMetric(descLeftOut, prometheus.GaugeValue, float64(st.LeftOut), st.ID)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.GaugeValue, float64(st.Failures), st.ID)
		last := 0.0
		if !st.LastSuccess.IsZero() {
			last = float64(st.LastSuccess.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(descLastSuccess, prometheus.GaugeValue, last, st.ID)
	}
}
