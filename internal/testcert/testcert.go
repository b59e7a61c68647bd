// Package testcert writes the certificates TLS tests need: a CA of their own, a server
// certificate it signs for 127.0.0.1 and localhost, and a client certificate it signs,
// all as PEM files in a test's directory. Nothing is committed: every run makes new keys.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the paths of the PEM files Write wrote.
type Files struct {
	CA                    string // the CA's certificate
	Cert, Key             string // the server's, for 127.0.0.1, ::1 and localhost
	ClientCert, ClientKey string // a client's
}

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// PEM is the CA's certificate.
func (ca *CA) PEM() []byte { return ca.pem }

// Leaf signs a certificate named name: a server's (for 127.0.0.1, ::1 and localhost) or
// a client's, and returns it and its key as PEM.
func (ca *CA) Leaf(name string, client bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses, tmpl.DNSNames = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// Write makes a CA and writes it, a server certificate named server and a client
// certificate named client, with their keys, to dir. The CA signs more with WriteLeaf.
func Write(dir, server, client string) (*CA, Files, error) {
	ca, err := NewCA("router test CA")
	if err != nil {
		return nil, Files{}, err
	}
	f := Files{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	if err := os.WriteFile(f.CA, ca.PEM(), 0o600); err != nil {
		return nil, Files{}, err
	}
	if err := ca.WriteLeaf(f.Cert, f.Key, server, false); err != nil {
		return nil, Files{}, err
	}
	return ca, f, ca.WriteLeaf(f.ClientCert, f.ClientKey, client, true)
}

// WriteLeaf signs a leaf certificate (see Leaf) and writes it and its key.
func (ca *CA) WriteLeaf(certFile, keyFile, name string, client bool) error {
	cert, key, err := ca.Leaf(name, client)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, key, 0o600)
}
