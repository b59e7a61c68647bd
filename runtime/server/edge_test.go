package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/routerkit/router/internal/testcert"
	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// Tests of the gateway in front of serving (edge.go): client keys, TLS termination, TLS
// to engines, the metrics listener. Real routers over simulated engines, real sockets.

func withKeys(p *plan.Plan, keys ...string) *plan.Plan {
	p.Auth = &plan.Auth{}
	for _, k := range keys {
		p.Auth.Keys = append(p.Auth.Keys, plan.DigestKey(k))
	}
	return p
}

func openaiClient(url, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func askOpenAI(t *testing.T, c openai.Client) error {
	t.Helper()
	_, err := c.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{
		Model: "m", MaxTokens: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	return err
}

// OpenAI's own client, as an application sends it: its key opens the data plane, another
// key gets OpenAI's 401 invalid_api_key; health stays open; a client key never opens
// the admin endpoints, which keep admin_token.
func TestClientKeysWithTheOpenAIClient(t *testing.T) {
	p := withKeys(plainPlan("E1"), "sk-first", "sk-second")
	p.AdminToken = "admin-secret"
	fc := startFleet(t, p)
	for _, key := range []string{"sk-first", "sk-second"} {
		if err := askOpenAI(t, openaiClient(fc.url, key)); err != nil {
			t.Errorf("key %s: %v", key, err)
		}
	}
	err := askOpenAI(t, openaiClient(fc.url, "sk-wrong"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusUnauthorized || oe.Code != "invalid_api_key" || oe.Type != "invalid_request_error" {
		t.Fatalf("a wrong key: %v, want OpenAI's 401 invalid_api_key", err)
	}
	if strings.Contains(err.Error(), "sk-wrong") {
		t.Errorf("the refusal shows the key: %v", err)
	}
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200},
		{"/readyz", "", 200},
		{"/v1/models", "", 401},
		{"/v1/models", "Bearer sk-first", 200},
		{"/metrics", "", 401},
		{"/admin/state", "Bearer sk-first", 401},
		{"/admin/state", "Bearer admin-secret", 200},
		{"/v1/models", "Bearer admin-secret", 401},
	} {
		if status, _, body := fc.call(t, http.MethodGet, tc.path, "", "Authorization", tc.auth); status != tc.want {
			t.Errorf("GET %s with %q: %d, want %d: %s", tc.path, tc.auth, status, tc.want, body)
		}
	}
	// The client's Authorization reaches the engine, as SMG sends its key to workers
	// (docs/serve.md, "Client keys"); headers.deny keeps it back.
	sent := fc.sent.headersTo(fc.fleet.Engine("E1").URL())
	if len(sent) == 0 || sent[len(sent)-1].Get("Authorization") != "Bearer sk-second" {
		t.Errorf("the engine got Authorization %v, want the client's", sent)
	}
}

// A reload reads the key file again: the plan's keys are the new generation's, and the
// old key stops opening the data plane.
func TestReloadChangesClientKeys(t *testing.T) {
	p := withKeys(plainPlan("E1"), "sk-old")
	var next *plan.Plan
	fc := startFleetWith(t, p, 0.01, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	next = withKeys(clone(fc.srv.current().plan), "sk-new")
	if err := askOpenAI(t, openaiClient(fc.url, "sk-old")); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.srv.ReloadConfig(); err != nil {
		t.Fatal(err)
	}
	if err := askOpenAI(t, openaiClient(fc.url, "sk-new")); err != nil {
		t.Errorf("the new key after reload: %v", err)
	}
	if err := askOpenAI(t, openaiClient(fc.url, "sk-old")); err == nil {
		t.Error("the old key still opens the data plane after reload")
	}
}

// tlsCase is a router terminating TLS over simulated engines.
type tlsCase struct {
	srv   *Server
	url   string
	roots *x509.CertPool
	files testcert.Files
	ca    *testcert.CA
}

// serveTLS serves p with a certificate of a new test CA (common name "first") on
// 127.0.0.1, and waits until it is ready over TLS.
func serveTLS(t *testing.T, p *plan.Plan, opts Options, clientCA bool) *tlsCase {
	t.Helper()
	ca, files, err := testcert.Write(t.TempDir(), "first", "client")
	if err != nil {
		t.Fatal(err)
	}
	p.TLS = &plan.TLS{CertFile: files.Cert, KeyFile: files.Key}
	if clientCA {
		p.TLS.ClientCAFile = files.CA
	}
	fleet := startSims(t, p, 0.01)
	for i := range p.Engines {
		p.Engines[i].URL = fleet.Engine(p.Engines[i].ID).URL()
	}
	srv, url := startRouterWith(t, p, opts)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM())
	tc := &tlsCase{srv: srv, url: "https://" + strings.TrimPrefix(url, "http://"), roots: roots, files: files, ca: ca}
	client := tc.client(clientCA)
	wait.For(t, "router ready over TLS", func() bool {
		resp, err := client.Get(tc.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return tc
}

// client trusts the test CA and, withCert, presents the client certificate.
func (tc *tlsCase) client(withCert bool) *http.Client {
	conf := &tls.Config{RootCAs: tc.roots}
	if withCert {
		cert, err := tls.LoadX509KeyPair(tc.files.ClientCert, tc.files.ClientKey)
		if err != nil {
			panic(err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 20 * time.Second}
}

// served asks GET /healthz and returns the common name of the certificate the router
// presented and whether the connection was reused.
func (tc *tlsCase) served(t *testing.T, c *http.Client) (name string, reused bool) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, tc.url+"/healthz", nil)
	req = req.WithContext(httptrace.WithClientTrace(testCtx(t), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz over TLS: %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName, reused
}

// A reload takes the certificate renewed on disk for new connections and drops none of
// the open ones; a renewal that does not load fails the reload, which says why, and
// the running certificate stays.
func TestTLSCertificateReload(t *testing.T) {
	p := plainPlan("E1")
	var next *plan.Plan
	tc := serveTLS(t, p, Options{Reload: func() (*plan.Plan, error) { return next, nil }}, false)
	next = clone(tc.srv.current().plan)
	kept := tc.client(false)
	if name, _ := tc.served(t, kept); name != "first" {
		t.Fatalf("certificate %q, want first", name)
	}
	if err := tc.ca.WriteLeaf(tc.files.Cert, tc.files.Key, "second", false); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.srv.ReloadConfig(); err != nil {
		t.Fatal(err)
	}
	if name, _ := tc.served(t, tc.client(false)); name != "second" {
		t.Errorf("a new connection after the reload got %q, want second", name)
	}
	if name, reused := tc.served(t, kept); name != "first" || !reused {
		t.Errorf("the open connection: certificate %q, reused %v; want first on the same connection", name, reused)
	}

	if err := os.WriteFile(tc.files.Key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := tc.srv.ReloadConfig()
	if err == nil || !strings.Contains(err.Error(), tc.files.Key) {
		t.Fatalf("reload with a broken key: %v, want an error naming %s", err, tc.files.Key)
	}
	if name, _ := tc.served(t, tc.client(false)); name != "second" {
		t.Errorf("after a failed reload a new connection got %q, want the running second", name)
	}
}

// With client_ca_file, a client without a certificate of that CA is refused at the
// handshake; one with it is served.
func TestTLSClientCertificateRequired(t *testing.T) {
	tc := serveTLS(t, plainPlan("E1"), Options{}, true)
	if _, err := tc.client(false).Get(tc.url + "/healthz"); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if name, _ := tc.served(t, tc.client(true)); name != "first" {
		t.Errorf("certificate %q", name)
	}
}

// The TLS handshake is behind the connection caps: connections that never finish
// their handshake hold their client's places, and the next one from that client is
// closed at accept, while another client is served.
func TestTLSHandshakesCountAgainstTheConnectionCaps(t *testing.T) {
	const perClient = 4
	p := plainPlan("E1")
	p.Limits.MaxConnections, p.Limits.MaxConnectionsPerClient = 64, perClient
	tc := serveTLS(t, p, Options{}, false)
	addr := strings.TrimPrefix(tc.url, "https://")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range perClient { // silent: no ClientHello
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	wait.For(t, "the silent handshakes counted", func() bool {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || (err != nil && !isTimeout(err))
	})
	if name, _ := tc.served(t, tc.client(false)); name != "first" {
		t.Errorf("another client: certificate %q", name)
	}
}

// tlsFront terminates TLS in front of a plain engine, requiring a client certificate
// of ca: an https engine with mTLS, made of the simulator and a TLS listener.
func tlsFront(t *testing.T, files testcert.Files, backend string) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(files.CA)
	pool.AppendCertsFromPEM(pem)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
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
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				b, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c); b.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return "https://" + ln.Addr().String()
}

// An https engine that requires a client certificate is served with engine_tls, by both
// engine transports (the router's hands https to net/http's) and by health and load
// polling: the router is ready and chats succeed only if every one of them presents the
// certificate and trusts the engine's CA.
func TestEngineMutualTLS(t *testing.T) {
	for _, kind := range []plan.EngineTransport{plan.TransportRouter, plan.TransportNetHTTP} {
		t.Run(string(kind), func(t *testing.T) {
			_, files, err := testcert.Write(t.TempDir(), "engine", "router")
			if err != nil {
				t.Fatal(err)
			}
			p := plainPlan("E1")
			p.EngineTransport = kind
			fleet := startSims(t, p, 0.01)
			p.Engines[0].URL = tlsFront(t, files, strings.TrimPrefix(fleet.Engine("E1").URL(), "http://"))
			p.EngineTLS = &plan.EngineTLS{CAFiles: []string{files.CA}, CertFile: files.ClientCert, KeyFile: files.ClientKey}
			fc := serveWith(t, p, Options{}, nil)
			if err := askOpenAI(t, openaiClient(fc.url, "k")); err != nil {
				t.Fatalf("a chat through the https engine: %v", err)
			}
		})
	}
}

// Without engine_tls, the router neither trusts the engine's CA nor has a certificate
// to show: the engine is unhealthy and no chat reaches it.
func TestEngineTLSIsNeeded(t *testing.T) {
	_, files, err := testcert.Write(t.TempDir(), "engine", "router")
	if err != nil {
		t.Fatal(err)
	}
	p := plainPlan("E1")
	fleet := startSims(t, p, 0.01)
	p.Engines[0].URL = tlsFront(t, files, strings.TrimPrefix(fleet.Engine("E1").URL(), "http://"))
	srv, err := New(p, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv.monitor.CheckAll(testCtx(t))
	if srv.reg.Get("E1").Healthy() {
		t.Fatal("an https engine requiring a client certificate is healthy without engine_tls")
	}
}

// metricsCase serves the router's metrics listener on a free port.
func (fc *fleetCase) serveMetrics(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fc.srv.ServeMetrics(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics listener: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// seriesLine is the line of series name in a metrics text, "" when absent.
func seriesLine(text, name string) string {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, name+"{") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// With metrics.listen, /metrics is served there without a client key and not on the
// serving address; router_build_info and router_config_hash are in it, and the hash
// follows a reload that changes the configuration.
func TestMetricsListener(t *testing.T) {
	p := withKeys(plainPlan("E1"), "sk-k")
	p.Metrics = &plan.MetricsListener{Listen: "127.0.0.1:0"}
	var next *plan.Plan
	fc := startFleetWith(t, p, 0.01, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	murl := fc.serveMetrics(t)
	status, text := getText(t, murl+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics listener: %d", status)
	}
	build := seriesLine(text, "router_build_info")
	if !strings.Contains(build, `goversion="go`) || !strings.HasSuffix(build, " 1") {
		t.Errorf("router_build_info: %q", build)
	}
	hash := seriesLine(text, "router_config_hash")
	if want := fmt.Sprintf(`router_config_hash{hash="%s"} 1`, configHash(p)); hash != want {
		t.Errorf("router_config_hash: %q, want %q", hash, want)
	}
	if status, _, _ := fc.call(t, http.MethodGet, "/metrics", "", "Authorization", "Bearer sk-k"); status != http.StatusNotFound {
		t.Errorf("GET /metrics on the serving address: %d, want 404", status)
	}
	if status, _ := getText(t, murl+"/v1/models"); status != http.StatusNotFound {
		t.Errorf("GET /v1/models on the metrics listener: %d, want 404", status)
	}

	next = clone(fc.srv.current().plan)
	next.Retries.MaxAttempts++
	if _, err := fc.srv.ReloadConfig(); err != nil {
		t.Fatal(err)
	}
	_, text = getText(t, murl+"/metrics")
	if again := seriesLine(text, "router_config_hash"); again == hash || again == "" {
		t.Errorf("router_config_hash after a reload changing retries: %q, was %q", again, hash)
	}
}

// The config hash is the same for equal configurations, differs for different ones, and
// is made without secrets: configurations differing only in the admin token or an engine
// URL's password hash alike.
func TestConfigHash(t *testing.T) {
	a, b := plainPlan("E1"), plainPlan("E1")
	if configHash(a) != configHash(b) {
		t.Fatal("equal plans hash differently")
	}
	b.AdminToken = "one"
	a.AdminToken = "two"
	a.Engines[0].URL, b.Engines[0].URL = "http://u:pw1@127.0.0.1:1", "http://u:pw2@127.0.0.1:1"
	if configHash(a) != configHash(b) {
		t.Error("the hash depends on secrets")
	}
	b.Engines[0].DPSize = 2
	if configHash(a) == configHash(b) {
		t.Error("plans differing in an engine hash alike")
	}
	withKeys(a, "sk-1")
	c := withKeys(clone(a), "sk-2")
	if configHash(a) == configHash(c) {
		t.Error("plans with different client keys hash alike (their redacted digests differ)")
	}
}

// The metrics listener bounds what a peer can make it hold: a header past 16 KiB is
// refused with 431, not read on; a request body is never read.
func TestMetricsListenerBounds(t *testing.T) {
	fc := startFleet(t, plainPlan("E1"))
	addr := strings.TrimPrefix(fc.serveMetrics(t), "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: m\r\nX-Big: ")
		_, _ = c.Write([]byte(strings.Repeat("a", 1<<20)))
	}()
	b := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, b, 12)
	if got := string(b[:n]); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Errorf("a 1 MiB header: %q, want 431", got)
	}
}

// Idle TLS keep-alive connections give way to new ones as plain ones do (clientconn.go):
// one client opening twice max_connections TLS connections, each asking once and
// staying idle, has every one answered.
func TestTLSIdleFloodDoesNotLockOut(t *testing.T) {
	const max = 16
	p := plainPlan("E1")
	p.Limits.MaxConnections = max
	tc := serveTLS(t, p, Options{}, false)
	addr := strings.TrimPrefix(tc.url, "https://")
	for i := range 2 * max {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", addr, &tls.Config{RootCAs: tc.roots})
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d got no answer: %v", i+1, err)
		}
		resp.Body.Close()
		_ = c.SetDeadline(time.Time{})
	}
}
