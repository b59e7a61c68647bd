package compiler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/testcert"
	"github.com/routerkit/router/runtime/plan"
)

const gatewayBase = `
engines: [{id: E1, url: "http://127.0.0.1:1", model: m, role: plain}]
models: {m: {buckets: [{id: all, groups: {plain: {policy: {type: random}}}}]}}
`

func compileGateway(t *testing.T, extra string) (*plan.Plan, error) {
	t.Helper()
	return CompileSources([]Source{{Name: "c.yaml", Data: []byte(gatewayBase + extra)}})
}

// Keys from the three sources together, each once, as digests: the plan, and so every
// printed form of it, holds no key.
func TestAuthKeysFromEverySource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# rotated 2026-12\nsk-file-1\n\n  sk-file-2  \nsk-literal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROUTER_TEST_KEYS", "sk-env-1, sk-env-2\nsk-env-3")
	p, err := compileGateway(t, "auth: {api_keys: [sk-literal], api_keys_env: ROUTER_TEST_KEYS, api_keys_file: "+file+"}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[plan.KeyDigest]bool{}
	for _, k := range []string{"sk-literal", "sk-env-1", "sk-env-2", "sk-env-3", "sk-file-1", "sk-file-2"} {
		want[plan.DigestKey(k)] = true
	}
	got := map[plan.KeyDigest]bool{}
	for _, d := range p.Auth.Keys {
		got[d] = true
	}
	if len(p.Auth.Keys) != len(want) || len(got) != len(want) {
		t.Fatalf("%d keys (%d distinct), want %d", len(p.Auth.Keys), len(got), len(want))
	}
	for d := range want {
		if !got[d] {
			t.Errorf("key %s missing", d)
		}
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sk-") {
		t.Errorf("the printed plan shows a key: %s", out)
	}
	if !strings.Contains(string(out), plan.DigestKey("sk-env-2").String()) {
		t.Errorf("the printed plan lacks the redacted form %s", plan.DigestKey("sk-env-2"))
	}
}

func TestGatewayErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nothing yet\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, files, err := testcert.Write(dir, "router", "client")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROUTER_TEST_EMPTY", " , ")
	for _, tc := range []struct{ name, config, want string }{
		{"no source", "auth: {}\n", "auth needs at least one of api_keys_file"},
		{"empty literal", "auth: {api_keys: [\"\"]}\n", "auth.api_keys[0] is empty"},
		{"no literal", "auth: {api_keys: []}\n", "auth accepts no key"},
		{"missing file", "auth: {api_keys_file: /nonexistent/keys}\n", "open /nonexistent/keys: no such file or directory; mount the keys file there"},
		{"file without keys", "auth: {api_keys_file: " + empty + "}\n", empty + " holds no key"},
		{"env unset", "auth: {api_keys_env: ROUTER_TEST_UNSET_VAR}\n", "the environment variable ROUTER_TEST_UNSET_VAR is not set"},
		{"env empty", "auth: {api_keys_env: ROUTER_TEST_EMPTY}\n", "the environment variable ROUTER_TEST_EMPTY is empty"},
		{"missing cert", "tls: {cert_file: /nonexistent/c.pem, key_file: " + files.Key + "}\n", "/nonexistent/c.pem"},
		{"mismatched key", "tls: {cert_file: " + files.Cert + ", key_file: " + files.ClientKey + "}\n", "private key does not match public key"},
		{"client CA not PEM", "tls: {cert_file: " + files.Cert + ", key_file: " + files.Key + ", client_ca_file: " + empty + "}\n", "holds no PEM certificate"},
		{"tls without key", "tls: {cert_file: " + files.Cert + "}\n", "key_file"},
		{"engine cert alone", "engine_tls: {cert_file: " + files.ClientCert + "}\n", "engine_tls needs cert_file and key_file together"},
		{"engine CA missing", "engine_tls: {ca_files: [/nonexistent/ca.pem]}\n", "/nonexistent/ca.pem"},
		{"metrics on listen", "metrics: {listen: \"127.0.0.1:30000\"}\n", "is the serving address"},
		{"metrics not an address", "metrics: {listen: \"29000\"}\n", "is not a host:port address"},
		{"metrics unknown field", "metrics: {listen: \"127.0.0.1:29000\", path: /m}\n", "path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileGateway(t, tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	p, err := compileGateway(t, "tls: {cert_file: "+files.Cert+", key_file: "+files.Key+", client_ca_file: "+files.CA+"}\n"+
		"engine_tls: {ca_files: ["+files.CA+"], cert_file: "+files.ClientCert+", key_file: "+files.ClientKey+"}\nmetrics: {listen: \"0.0.0.0:29000\"}\n")
	if err != nil {
		t.Fatal(err)
	}
	if p.TLS.ClientCAFile != files.CA || p.EngineTLS.CertFile != files.ClientCert || p.Metrics.Listen != "0.0.0.0:29000" {
		t.Errorf("compiled gateway: %+v %+v %+v", p.TLS, p.EngineTLS, p.Metrics)
	}
}
