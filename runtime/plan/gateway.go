package plan

import (
	"crypto/sha256"
	"encoding/hex"
)

// Auth is client authentication: every request but the health checks and the admin
// endpoints (which keep admin_token) needs Authorization: Bearer with one of Keys.
type Auth struct {
	// Keys are the SHA-256 digests of the accepted keys, from api_keys, api_keys_env and
	// api_keys_file together. The plan never holds a key itself, so no output of it (a
	// printed plan, /admin/state, the config hash) can show one.
	Keys []KeyDigest `json:"api_keys"`
	// KeysEnv and KeysFile name where the compiler read keys; the file is read again by
	// every reload, so a rotated Secret takes effect without a restart.
	KeysEnv  string `json:"api_keys_env,omitempty"`
	KeysFile string `json:"api_keys_file,omitempty"`
}

// KeyDigest is the SHA-256 digest of a client key.
type KeyDigest [sha256.Size]byte

// DigestKey is key's digest.
func DigestKey(key string) KeyDigest { return sha256.Sum256([]byte(key)) }

// String is the key's redacted form: "sha256:" and the first 8 hex digits of its digest,
// enough for an operator to tell which of their keys a plan holds, never the key.
func (d KeyDigest) String() string { return "sha256:" + hex.EncodeToString(d[:4]) }

// MarshalText writes the redacted form.
func (d KeyDigest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// TLS is TLS termination on the serving listener.
type TLS struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// ClientCAFile, when set, makes every client present a certificate signed by it.
	ClientCAFile string `json:"client_ca_file,omitempty"`
}

// EngineTLS is the TLS client side of https:// engines.
type EngineTLS struct {
	// CAFiles are trusted besides the system roots.
	CAFiles []string `json:"ca_files,omitempty"`
	// CertFile and KeyFile are the router's client certificate (mTLS), both or neither.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// MetricsListener moves /metrics off the serving listener to an address of its own.
type MetricsListener struct {
	Listen string `json:"listen"`
}
