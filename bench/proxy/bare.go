package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"

	"github.com/routerkit/router/runtime/gcpace"
)

// ServeBare runs the baseline: an httputil.ReverseProxy that sends requests round robin
// to upstreams, with the transport a proxy would tune (idle connections per host) and
// immediate flushing for streams. It is what any Go proxy pays before doing any work of
// its own. Its garbage collector is paced as the router's is (runtime/gcpace), so that
// the two compare request paths, not runtime settings.
func ServeBare(ln net.Listener, upstreams []string) error {
	gcpace.Start(context.Background())
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
	// Like the router, which must read a body to route it, the baseline reads the whole
	// body before forwarding it with its length. (Forwarding the client's body as it
	// arrives also cut streamed answers: the engine-side read failed with "use of closed
	// network connection" on about 1% of streams at one client.)
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r)
	}))
}
