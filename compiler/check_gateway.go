package compiler

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/edge/certs"
	"github.com/routerkit/router/runtime/plan"
)

// authKeys is the auth block as written. Its literal keys become digests in the plan at
// once (plan), and checkGateway adds those of the environment variable and the file.
type authKeys struct {
	APIKeys     []string `json:"api_keys"`
	APIKeysEnv  string   `json:"api_keys_env"`
	APIKeysFile string   `json:"api_keys_file"`

	empty []int // the indexes of empty literal keys, reported by checkGateway
}

func (a *authKeys) plan() *plan.Auth {
	if a == nil {
		return nil
	}
	out := &plan.Auth{Keys: []plan.KeyDigest{}, KeysEnv: a.APIKeysEnv, KeysFile: a.APIKeysFile}
	for i, k := range a.APIKeys {
		if strings.TrimSpace(k) == "" {
			a.empty = append(a.empty, i)
			continue
		}
		out.Keys = addKey(out.Keys, strings.TrimSpace(k))
	}
	return out
}

// addKey adds key's digest once.
func addKey(keys []plan.KeyDigest, key string) []plan.KeyDigest {
	d := plan.DigestKey(key)
	for _, k := range keys {
		if k == d {
			return keys
		}
	}
	return append(keys, d)
}

// maxKeysFile bounds the key file read: a key file is a few lines, and a path pointing at
// something else (a log, a device) must not be read whole into memory.
const maxKeysFile = 1 << 20

// checkGateway checks the gateway blocks and reads what they name, so that a missing or
// unusable file is a compile error naming the file, not a surprise at start or reload.
func (c *checker) checkGateway(raw *authKeys) {
	c.checkAuth(raw)
	if t := c.p.TLS; t != nil {
		if _, err := certs.Server(t); err != nil {
			c.at(sel("tls"), "%v; point cert_file and key_file at a PEM certificate chain and its private key, client_ca_file at a PEM file of CA certificates", err)
		}
	}
	if e := c.p.EngineTLS; e != nil {
		if (e.CertFile == "") != (e.KeyFile == "") {
			c.at(sel("engine_tls"), "engine_tls needs cert_file and key_file together: the client certificate and its private key")
		} else if _, err := certs.Engine(e); err != nil {
			c.at(sel("engine_tls"), "%v; point ca_files at PEM files of CA certificates, cert_file and key_file at a PEM certificate and its private key", err)
		}
	}
	if m := c.p.Metrics; m != nil {
		_, port, err := net.SplitHostPort(m.Listen)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			c.at(sel("metrics", "listen"), "metrics.listen %q is not a host:port address with a port from 0 to 65535, e.g. \"0.0.0.0:29000\"", m.Listen)
		} else if m.Listen == c.p.Listen {
			c.at(sel("metrics", "listen"), "metrics.listen %q is the serving address: give /metrics a port of its own, or remove the metrics block to serve it on listen", m.Listen)
		}
	}
}

// checkAuth reads the keys of api_keys_env and api_keys_file into the plan, and refuses
// an auth block that, all sources together, accepts no key: a router that lets nobody in
// is a mistake, and one that lets everybody in would be worse.
func (c *checker) checkAuth(raw *authKeys) {
	a := c.p.Auth
	if a == nil {
		return
	}
	reported := len(c.errs.errs)
	for _, i := range raw.empty {
		c.at(sel("auth", "api_keys", i), "auth.api_keys[%d] is empty: a key is a non-empty string; remove the entry", i)
	}
	if raw.APIKeys == nil && a.KeysEnv == "" && a.KeysFile == "" {
		c.at(sel("auth"), "auth needs at least one of api_keys_file (a file of keys, one a line), api_keys_env (an environment variable) or api_keys")
		return
	}
	if a.KeysEnv != "" {
		v, ok := os.LookupEnv(a.KeysEnv)
		found := false
		for k := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
			if k = strings.TrimSpace(k); k != "" {
				a.Keys, found = addKey(a.Keys, k), true
			}
		}
		if !found {
			why := "is empty"
			if !ok {
				why = "is not set"
			}
			c.at(sel("auth", "api_keys_env"), "the environment variable %s %s; export it with the keys, separated by commas", a.KeysEnv, why)
		}
	}
	if a.KeysFile != "" {
		keys, err := readKeysFile(a.KeysFile)
		switch {
		case err != nil:
			c.at(sel("auth", "api_keys_file"), "%v; mount the keys file there (one key a line) or remove api_keys_file", err)
		case len(keys) == 0:
			c.at(sel("auth", "api_keys_file"), "%s holds no key; write one key a line (blank lines and # comments are skipped)", a.KeysFile)
		}
		for _, k := range keys {
			a.Keys = addKey(a.Keys, k)
		}
	}
	if len(a.Keys) == 0 && len(c.errs.errs) == reported {
		c.at(sel("auth"), "auth accepts no key: give at least one non-empty key in api_keys_file, api_keys_env or api_keys")
	}
}

// readKeysFile reads one key a line, skipping blank lines and # comments.
func readKeysFile(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxKeysFile {
		return nil, fmt.Errorf("%s is over %d bytes, too large for a keys file", name, maxKeysFile)
	}
	var keys []string
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	return keys, nil
}
