package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

var clientTransports = []plan.ClientTransport{plan.ClientTransportRouter, plan.ClientTransportNetHTTP}

// forClientTransports runs f as a subtest per client transport.
func forClientTransports(t *testing.T, f func(t *testing.T, kind plan.ClientTransport)) {
	for _, kind := range clientTransports {
		t.Run(string(kind), func(t *testing.T) { f(t, kind) })
	}
}

// rawAnswer is one response as the transports' comparison sees it: what varies from
// request to request (ids, times) and the framing left out.
type rawAnswer struct {
	Status  int
	Header  string
	Body    string
	Trailer string
}

var varying = regexp.MustCompile(`"(id|created|request_id)":\s*("[^"]*"|\d+)|chatcmpl-[0-9a-zA-Z-]+|req-[0-9a-zA-Z-]+`)

// rawExchange writes raw to the router at url and reads up to n answers (fewer if the
// router closes the connection), methods giving each request's method.
func rawExchange(t *testing.T, url, raw string, n int, methods ...string) []rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = io.WriteString(c, raw) }()
	br := bufio.NewReader(c)
	var as []rawAnswer
	for i := 0; len(as) < n; i++ {
		req := &http.Request{Method: http.MethodGet}
		if len(as) < len(methods) {
			req.Method = methods[len(as)]
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			break
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d's body: %v", len(as), err)
		}
		h := resp.Header.Clone()
		for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding", "Connection", "X-Request-Id"} {
			delete(h, k)
		}
		var hb bytes.Buffer
		_ = h.Write(&hb)
		as = append(as, rawAnswer{resp.StatusCode, hb.String(), varying.ReplaceAllString(string(b), "…"), fmt.Sprint(resp.Trailer)})
		if resp.Close {
			break
		}
	}
	return as
}

// TestClientTransportsAgree sends the same requests to a router serving its clients with
// its own server and with net/http's, over simulated engines, and compares the answers:
// status, headers but the framing and Date, and bodies but their ids and times.
func TestClientTransportsAgree(t *testing.T) {
	body := chat("m", "hello there", `, "max_tokens": 4`)
	post := func(extra, b string) string {
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n" + extra +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(b)) + b
	}
	chunked := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	cases := []struct {
		name, raw string
		n         int
		methods   []string
	}{
		{"chat", post("", body), 1, nil},
		{"stream", post("", chat("m", "hello there", `, "max_tokens": 4, "stream": true`)), 1, nil},
		{"head", "HEAD /healthz HTTP/1.1\r\nHost: r\r\n\r\nHEAD /v1/models HTTP/1.1\r\nHost: r\r\n\r\n", 2, []string{"HEAD", "HEAD"}},
		{"404 and 405", "GET /nowhere HTTP/1.1\r\nHost: r\r\n\r\nGET /v1/chat/completions HTTP/1.1\r\nHost: r\r\n\r\n", 2, nil},
		{"expect 100-continue", post("Expect: 100-continue\r\n", body), 2, nil},
		{"chunked body", chunked, 1, nil},
		{"pipelined", "GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n" + post("", body) + "GET /v1/models HTTP/1.1\r\nHost: r\r\n\r\n", 3, nil},
		{"connection close", "GET /healthz HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\nGET /healthz HTTP/1.1\r\nHost: r\r\n\r\n", 2, nil},
		{"http/1.0", "GET /healthz HTTP/1.0\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n", 2, nil},
		{"head over 1 MiB", "GET /healthz HTTP/1.1\r\nHost: r\r\nX-Big: " + strings.Repeat("b", 1<<20+1) + "\r\n\r\n", 1, nil},
		{"missing host", "GET /healthz HTTP/1.1\r\n\r\n", 1, nil},
		{"bad host", "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", 1, nil},
		{"body over 32 MiB", "POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length: 40000000\r\n\r\n{", 1, nil},
	}
	answers := map[plan.ClientTransport][][]rawAnswer{}
	for _, kind := range clientTransports {
		p := plainPlan("E1")
		p.ClientTransport = kind
		fc := startFleet(t, p)
		for _, tc := range cases {
			answers[kind] = append(answers[kind], rawExchange(t, fc.url, tc.raw, tc.n, tc.methods...))
		}
	}
	for i, tc := range cases {
		ours, theirs := answers[plan.ClientTransportRouter][i], answers[plan.ClientTransportNetHTTP][i]
		if len(ours) == 0 || !slices.Equal(ours, theirs) {
			t.Errorf("%s:\nrouter:   %+v\nnet_http: %+v", tc.name, ours, theirs)
		}
	}
}

// A streamed answer's trailers from the engine reach the client through both transports.
func TestClientTransportsForwardTrailers(t *testing.T) {
	engine := chatEngine(func(w http.ResponseWriter) {
		w.Header().Set("Trailer", "X-Engine-Sum")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		w.Header().Set("X-Engine-Sum", "42")
		w.Header().Set(http.TrailerPrefix+"X-Late", "7")
	})
	defer engine.Close()
	var got []string
	for _, kind := range clientTransports {
		p := plainPlan("E1")
		p.Engines[0].URL = engine.URL
		p.ClientTransport = kind
		fc := serveRouter(t, p, Options{})
		resp, err := http.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat("m", "x", `, "max_tokens": 1, "stream": true`)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Trailer.Get("X-Engine-Sum") != "42" || resp.Trailer.Get("X-Late") != "7" {
			t.Errorf("%s: trailers %v, want the engine's X-Engine-Sum and X-Late (%d %s)", kind, resp.Trailer, resp.StatusCode, b)
		}
		got = append(got, fmt.Sprint(resp.StatusCode, resp.Trailer, string(b)))
	}
	if got[0] != got[1] {
		t.Errorf("router %s\nnet_http %s", got[0], got[1])
	}
}

// An engine's informational (103) answer reaches the client when the net_http engine
// transport carries the request, the only one that reports them (dispatch's relay), and
// is skipped by the router's own; the final answer carries none of its headers either way.
func TestEngineTransportsInformational(t *testing.T) {
	engine := chatEngine(func(w http.ResponseWriter) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[]}`)
	})
	defer engine.Close()
	for _, tc := range []struct {
		kind  plan.EngineTransport
		hints int
	}{{plan.TransportRouter, 0}, {plan.TransportNetHTTP, 1}} {
		p := plainPlan("E1")
		p.Engines[0].URL = engine.URL
		p.EngineTransport = tc.kind
		fc := serveRouter(t, p, Options{})
		var links []string
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			if code == http.StatusEarlyHints {
				links = append(links, h.Get("Link"))
			}
			return nil
		}})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fc.url+"/v1/chat/completions", strings.NewReader(chat("m", "x", `, "max_tokens": 1`)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != `{"choices":[]}` || resp.Header.Get("Link") != "" {
			t.Errorf("%s: %d %q, Link %q", tc.kind, resp.StatusCode, b, resp.Header.Get("Link"))
		}
		if len(links) != tc.hints || (tc.hints > 0 && links[0] != "</style.css>; rel=preload") {
			t.Errorf("%s: early hints %q, want %d with the engine's Link", tc.kind, links, tc.hints)
		}
	}
}

// chatEngine is an engine that answers its chat completions with answer, after reading the
// request's body, and any other path (the router's health and load polls) with "{}".
func chatEngine(answer func(w http.ResponseWriter)) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			_, _ = io.WriteString(w, "{}")
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		answer(w)
	}))
}
