package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// ServeBare runs the baseline: an httputil.ReverseProxy that sends requests round robin
// to upstreams, with the transport a proxy would tune (idle connections per host) and
// immediate flushing for streams. It is what any Go proxy pays before doing any work of
// its own.
func ServeBare(ln net.Listener, upstreams []string) error {
	targets := make([]*url.URL, len(upstreams))
	for i, u := range upstreams {
		t, err := url.Parse(u)
		if err != nil {
			return fmt.Errorf("upstream %q: %w", u, err)
		}
		targets[i] = t
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	var next atomic.Uint64
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targets[next.Add(1)%uint64(len(targets))])
		},
		Transport:     tr,
		FlushInterval: -1,
	}
	return http.Serve(ln, rp)
}
