package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/routerkit/router/internal/proc"
)

// Target is one way to reach the engines: a proxy process, or none (direct).
type Target struct {
	Name string
	URL  string
	// Cmd is the proxy's process; nil for direct.
	Cmd *exec.Cmd
}

// PID is the measured process, or 0 for direct.
func (t *Target) PID() int {
	if t.Cmd == nil {
		return 0
	}
	return t.Cmd.Process.Pid
}

// Stop ends the proxy process.
func (t *Target) Stop() {
	if t.Cmd != nil {
		proc.Stop(t.Cmd, 5*time.Second)
	}
}

// freeAddr returns a loopback address nobody listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs cmd as a target serving at addr and waits until readyPath answers 200.
func start(name, addr, readyPath string, cmd *exec.Cmd) (*Target, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	t := &Target{Name: name, URL: "http://" + addr, Cmd: cmd}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(t.URL + readyPath); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return t, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Stop()
	return nil, fmt.Errorf("%s not ready at %s after 15s", name, addr)
}

// StartRouter runs `router serve` over the engines with one policy and, when tokDir is
// not empty, the HuggingFace tokenizer and chat template in that directory
// (tokenizer.json.gz and tokenizer_config.json, as in testdata/tokenizers); the target is
// then named after the directory too. Its request log goes to a discarded stderr, as it
// would to a log file: the record is still built and written. label starts the target's
// name ("router", or "baseline" for a build to compare with); extra are more flags for
// `router serve` (say --log-level warn, to see what the log line costs).
func StartRouter(bin, label, dir, policy, tokDir string, engines []string, kvEndpoints []string, extra ...string) (*Target, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	name := label + "/" + policy
	var b strings.Builder
	b.WriteString("engines:\n")
	for i, u := range engines {
		fmt.Fprintf(&b, "  - {id: E%d, url: %q, model: m, role: plain", i+1, u)
		if policy == "cache_aware" && i < len(kvEndpoints) {
			fmt.Fprintf(&b, ", kv_events: {endpoint: %q}", kvEndpoints[i])
		}
		b.WriteString("}\n")
	}
	b.WriteString("models:\n  m:\n")
	if tokDir != "" {
		abs, err := filepath.Abs(tokDir)
		if err != nil {
			return nil, err
		}
		name += "/" + filepath.Base(abs)
		fmt.Fprintf(&b, "    tokenizer: {path: %q, config: %q}\n", filepath.Join(abs, "tokenizer.json.gz"), filepath.Join(abs, "tokenizer_config.json"))
	}
	fmt.Fprintf(&b, "    buckets:\n      - id: all\n        limits: {min: 0}\n        groups:\n          plain:\n            policy: {type: %s, admission: {max_inflight_requests: 100000}}\n", policy)
	cfg := filepath.Join(dir, strings.ReplaceAll(name, "/", "-")+".yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"serve", "--config", cfg, "--listen", addr}, extra...)...)
	return start(name, addr, "/readyz", cmd)
}

// StartBare re-runs this program as the bare reverse proxy (see ServeBare).
func StartBare(self string, engines []string) (*Target, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-bare", addr, "-upstreams", strings.Join(engines, ","))
	cmd.Stderr = os.Stderr
	return start("bare_proxy", addr, "/health", cmd)
}

// StartNginx runs nginx with a round-robin upstream of the engines, keep-alive connections
// to them, no response buffering (streams pass through), request bodies of up to 2 MiB
// kept in memory (a long prompt would otherwise go to a temporary file, which nginx's
// unprivileged workers cannot write here) and a buffered access log, with as many workers
// as cores. It returns nil, nil when nginx is not installed.
func StartNginx(dir string, engines []string) (*Target, error) {
	bin, err := exec.LookPath("nginx")
	if errors.Is(err, exec.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	var up strings.Builder
	for _, u := range engines {
		fmt.Fprintf(&up, "    server %s;\n", strings.TrimPrefix(u, "http://"))
	}
	conf := fmt.Sprintf(`worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log error;
events { worker_connections 4096; }
http {
  access_log %[1]s/access.log combined buffer=64k;
  client_max_body_size 16m;
  client_body_buffer_size 2m;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream engines {
%[2]s    keepalive 256;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://engines;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`, prefix, up.String(), addr)
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", prefix, "-e", filepath.Join(prefix, "error.log"), "-c", path, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	return start("nginx", addr, "/health", cmd)
}
