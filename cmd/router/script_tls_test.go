package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/routerkit/router/internal/testcert"
)

// setupTLS writes a test CA, a server certificate for 127.0.0.1 and a client certificate
// into the script's work directory, and names them in $TLS_CA, $TLS_CERT, $TLS_KEY,
// $TLS_CLIENT_CERT and $TLS_CLIENT_KEY, for scripts serving TLS (the client pair for an
// engine_tls client certificate). No certificate is
// committed: each script run makes its own.
func setupTLS(env *testscript.Env) error {
	dir := filepath.Join(env.WorkDir, "tls")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	_, f, err := testcert.Write(dir, "router", "client")
	if err != nil {
		return err
	}
	env.Setenv("TLS_CA", f.CA)
	env.Setenv("TLS_CERT", f.Cert)
	env.Setenv("TLS_KEY", f.Key)
	env.Setenv("TLS_CLIENT_CERT", f.ClientCert)
	env.Setenv("TLS_CLIENT_KEY", f.ClientKey)
	return nil
}

// scriptClient is the client of the http and waitfor commands for url. An https URL
// gets a client that trusts $TLS_CA; a plain one gets http.DefaultTransport, whose kept-alive
// connection makes a script's requests follow each other on the router's side too.
func scriptClient(ts *testscript.TestScript, url string) *http.Client {
	if !strings.HasPrefix(url, "https://") {
		return &http.Client{Timeout: 20 * time.Second}
	}
	conf := &tls.Config{}
	if ca := ts.Getenv("TLS_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		ts.Check(err)
		conf.RootCAs = x509.NewCertPool()
		conf.RootCAs.AppendCertsFromPEM(pem)
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
}
