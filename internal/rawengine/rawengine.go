// Package rawengine holds what the transport tests share: an engine that writes its
// answers as raw bytes, so a test can send what net/http's server never would (1xx
// responses, oversized headers, an answer before the request's body was read), and the
// one POST they make. The router's own transport and net/http's are checked against the
// same engines (runtime/upstream, runtime/dispatch).
package rawengine

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Start serves 127.0.0.1 until the test ends and returns its base URL. Every request on
// a connection gets answer after its body is read; with early set, answer goes out after
// the headers alone, the engine ends its side of the connection and drains the body it
// never read: an engine that answers early.
func Start(t testing.TB, answer string, early bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c, answer, early)
		}
	}()
	return "http://" + ln.Addr().String()
}

func serve(c net.Conn, answer string, early bool) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if early {
			_, _ = io.WriteString(c, answer)
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, c)
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, answer)
	}
}

// Post sends body to u through tr and returns the answer's status and body; a failed
// round trip or body read is returned, a request that cannot be built fails the test.
func Post(t testing.TB, tr http.RoundTripper, ctx context.Context, u, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
