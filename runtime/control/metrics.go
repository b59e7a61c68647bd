package control

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the control plane's series: reloads by result, membership changes by
// change and origin (every series present from the start, at 0), and the members by
// origin and state.
type Metrics struct {
	Reloads *prometheus.CounterVec
	Changes *prometheus.CounterVec
	members func() []Member
}

var descMembers = prometheus.NewDesc("router_engines",
	"Member engines by origin (config, admin, dns) and state (serving, draining, leaving).", []string{"origin", "state"}, nil)

// NewMetrics returns the control plane's series, the members read from members at each
// scrape. Register it whole: it collects its counters and the member gauge.
func NewMetrics(members func() []Member) *Metrics {
	m := &Metrics{members: members}
	m.Reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "router_reloads_total", Help: "Configuration reloads by result: applied, refused (the config did not compile or changes a setting that needs a restart) or failed (the new plan could not be built).",
	}, []string{"result"})
	m.Changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "router_engine_membership_changes_total", Help: "Engines added, replaced (changed identity on a reload), drained and removed, by origin (config, admin, dns).",
	}, []string{"change", "origin"})
	for _, r := range []string{"applied", "refused", "failed"} {
		m.Reloads.WithLabelValues(r)
	}
	for _, c := range []string{"added", "replaced", "drained", "removed"} {
		for _, o := range Origins {
			m.Changes.WithLabelValues(c, o)
		}
	}
	return m
}

// CountReload counts an applied reload and the membership changes it made.
func (m *Metrics) CountReload(res ReloadResult) {
	m.Reloads.WithLabelValues("applied").Inc()
	m.Changes.WithLabelValues("added", OriginConfig).Add(float64(len(res.Added)))
	m.Changes.WithLabelValues("replaced", OriginConfig).Add(float64(len(res.Replaced)))
	m.Changes.WithLabelValues("removed", OriginConfig).Add(float64(len(res.Removed)))
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.Reloads.Describe(ch)
	m.Changes.Describe(ch)
	ch <- descMembers
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.Reloads.Collect(ch)
	m.Changes.Collect(ch)
	counts := map[[2]string]int{}
	for _, o := range Origins {
		for _, st := range []string{"serving", "draining", "leaving"} {
			counts[[2]string{o, st}] = 0
		}
	}
	for _, mb := range m.members() {
		counts[[2]string{mb.Origin, mb.State}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
