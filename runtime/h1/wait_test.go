package h1

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
)

// The wait tick starts the pending read of a request that outlasts waitDelay, so that
// its client leaving cancels it, while other connections come and go through the list
// with requests answered at once; and it stops once no connection is armed, so that an
// idle server keeps no timer firing.
func TestWaitTick(t *testing.T) {
	cancelled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
				close(cancelled)
			case <-time.After(wait.Timeout):
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	s := &Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	url := "http://" + ln.Addr().String()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(url+"/fast", "text/plain", nil)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST /slow HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok")
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(wait.Timeout):
		t.Error("the slow request was not cancelled when its client left")
	}
	close(stop)
	wg.Wait()
	wait.For(t, "the wait tick to stop with no connection armed", func() bool {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		return !s.ticking && len(s.waiters) == 0
	})
}
