// Package certs builds TLS configurations from the PEM files a config names: the
// serving listener's (termination, optional client-certificate verification) and the
// client side of https engines (extra CAs, the router's client certificate).
//
// Every file is read when a configuration is built, at start and on each reload, so a
// certificate renewed on disk (cert-manager, a mounted Secret) is taken by
// `router reload` or SIGHUP; connections already open keep the certificate they were
// made with.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/routerkit/router/runtime/plan"
)

// Server is the serving listener's TLS configuration of t: its certificate and, with
// client_ca_file, the verification of every client's certificate. It speaks HTTP/1.1
// only, as the plain listener does.
func Server(t *plan.TLS) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the certificate %s with the key %s: %w", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if t.ClientCAFile != "" {
		pool, err := pool(nil, t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client_ca_file: %w", err)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// Engine is the TLS client configuration of https engines: the system roots plus
// e's CA files, and e's client certificate when it has one. A nil e is nil: Go's
// defaults.
func Engine(e *plan.EngineTLS) (*tls.Config, error) {
	if e == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(e.CAFiles) > 0 {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool() // no system roots on this host: the CA files alone
		}
		for _, f := range e.CAFiles {
			if roots, err = pool(roots, f); err != nil {
				return nil, fmt.Errorf("ca_files: %w", err)
			}
		}
		c.RootCAs = roots
	}
	if e.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate %s with the key %s: %w", e.CertFile, e.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// pool adds the certificates of the PEM file name to p (a new pool when nil).
func pool(p *x509.CertPool, name string) (*x509.CertPool, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading the CA file: %w", err)
	}
	if p == nil {
		p = x509.NewCertPool()
	}
	if !p.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("the CA file %s holds no PEM certificate", name)
	}
	return p, nil
}

// Listener is a serving listener's TLS configuration that follows reloads: each
// handshake takes the configuration current takes, so a new certificate applies to new
// connections at once and open ones are never dropped.
func Listener(current func() *tls.Config) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return current(), nil
		},
	}
}
