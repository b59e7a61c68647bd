package monitor

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// newClient returns the client, speaking TLS with tlsConf (engine_tls) when not nil, the monitor polls engines with when a connection of the
// poll loop's own cannot reach them (https, a proxy): one for the whole fleet, on a
// transport of its own so polls neither take nor evict the idle connections requests
// use. Polls of one engine run one at a time, so one idle connection per engine is
// kept, with no cap on the total: a cap below the fleet size closes and redials
// connections on every round of polls, which is what made polling 2048 engines cost
// more per engine than 512 (docs/benchmarks.md, "Fleet polling"). The idle timeout is
// well above any poll interval, so a connection is reused for the engine's life.
func newClient(connectTimeout time.Duration, tlsConf *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConf != nil {
		tr.TLSClientConfig = tlsConf.Clone()
	}
	tr.MaxIdleConns = 0 // no total cap: the fleet bounds it
	tr.MaxIdleConnsPerHost = 2
	tr.IdleConnTimeout = 5 * time.Minute
	tr.ForceAttemptHTTP2 = false
	tr.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirected /health or load report is a failure
	}}
}
