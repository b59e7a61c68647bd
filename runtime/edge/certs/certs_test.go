package certs

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/testcert"
	"github.com/routerkit/router/runtime/plan"
)

func writeCerts(t *testing.T) (*testcert.CA, testcert.Files) {
	t.Helper()
	ca, f, err := testcert.Write(t.TempDir(), "router", "client")
	if err != nil {
		t.Fatal(err)
	}
	return ca, f
}

// tlsServer serves "ok" over TLS with conf on 127.0.0.1.
func tlsServer(t *testing.T, conf *tls.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := ""
		if len(r.TLS.PeerCertificates) > 0 {
			name = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		_, _ = io.WriteString(w, "ok "+name)
	}))
	srv.TLS = conf
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestClientCertificates: with client_ca_file, a client without a certificate of that CA
// is refused at the handshake; Engine's configuration (the CA file, the client
// certificate) is what such a server accepts.
func TestClientCertificates(t *testing.T) {
	_, f := writeCerts(t)
	serverConf, err := Server(&plan.TLS{CertFile: f.Cert, KeyFile: f.Key, ClientCAFile: f.CA})
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsServer(t, serverConf)

	withCert, err := Engine(&plan.EngineTLS{CAFiles: []string{f.CA}, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	body, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: withCert}}, srv.URL)
	if err != nil || body != "ok client" {
		t.Fatalf("with the client certificate: %q, %v", body, err)
	}

	caOnly, err := Engine(&plan.EngineTLS{CAFiles: []string{f.CA}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: caOnly}}, srv.URL); err == nil {
		t.Fatal("a client without a certificate was served")
	}

	// A certificate of another CA is refused too.
	other, err := testcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	oc, ok := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := other.WriteLeaf(oc, ok, "stranger", true); err != nil {
		t.Fatal(err)
	}
	stranger, err := Engine(&plan.EngineTLS{CAFiles: []string{f.CA}, CertFile: oc, KeyFile: ok})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: stranger}}, srv.URL); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
}

// TestEngineTrustsTheCAFiles: without ca_files the test CA's server is not trusted; with
// them it is.
func TestEngineTrustsTheCAFiles(t *testing.T) {
	_, f := writeCerts(t)
	serverConf, err := Server(&plan.TLS{CertFile: f.Cert, KeyFile: f.Key})
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsServer(t, serverConf)
	if _, err := get(&http.Client{Transport: &http.Transport{}}, srv.URL); err == nil {
		t.Fatal("the test CA is trusted without ca_files")
	}
	conf, err := Engine(&plan.EngineTLS{CAFiles: []string{f.CA}})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(&http.Client{Transport: &http.Transport{TLSClientConfig: conf}}, srv.URL); err != nil || body != "ok " {
		t.Fatalf("with ca_files: %q, %v", body, err)
	}
}

func TestErrorsNameTheFile(t *testing.T) {
	_, f := writeCerts(t)
	notPEM := filepath.Join(t.TempDir(), "notpem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"missing cert": second(Server(&plan.TLS{CertFile: "/nonexistent/c.pem", KeyFile: f.Key})),
		"key mismatch": second(Server(&plan.TLS{CertFile: f.Cert, KeyFile: f.ClientKey})),
		"CA not PEM":   second(Server(&plan.TLS{CertFile: f.Cert, KeyFile: f.Key, ClientCAFile: notPEM})),
		"engine CA":    second(Engine(&plan.EngineTLS{CAFiles: []string{"/nonexistent/ca.pem"}})),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), "/nonexistent/") && !strings.Contains(err.Error(), f.Cert) && !strings.Contains(err.Error(), notPEM) {
			t.Errorf("%s: %v does not name the file", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
