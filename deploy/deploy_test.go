// Package deploy holds no code: its test checks the container recipe and the Kubernetes
// manifests beside it against the router they package.
package deploy

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
)

// object is one Kubernetes manifest, decoded to the fields the checks read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		ClusterIP string    `yaml:"clusterIP"`
		Ports     []svcPort `yaml:"ports"`
		Template  struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type svcPort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort any    `yaml:"targetPort"`
}

type security struct {
	RunAsNonRoot *bool `yaml:"runAsNonRoot"`
	RunAsUser    *int  `yaml:"runAsUser"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int      `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               security `yaml:"securityContext"`
	Containers                    []struct {
		Name  string   `yaml:"name"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe   *probe   `yaml:"livenessProbe"`
		ReadinessProbe  *probe   `yaml:"readinessProbe"`
		Lifecycle       any      `yaml:"lifecycle"`
		SecurityContext security `yaml:"securityContext"`
	} `yaml:"containers"`
}

// manifests decodes every document of every file under kubernetes/ but the kustomization.
func manifests(t *testing.T) map[string]object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under deploy/kubernetes: %v", err)
	}
	objs := map[string]object{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(false)
		for {
			var o object
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			key := o.Kind + "/" + o.Metadata.Name
			if _, dup := objs[key]; dup {
				t.Fatalf("%s: %s declared twice", f, key)
			}
			objs[key] = o
		}
	}
	return objs
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	b, err := os.ReadFile("kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("kustomization.yaml does not list %s", base)
		}
	}
}

func TestManifestsMatchTheRouterConfig(t *testing.T) {
	objs := manifests(t)
	get := func(key string) object {
		t.Helper()
		o, ok := objs[key]
		if !ok {
			t.Fatalf("no %s among the manifests", key)
		}
		return o
	}
	cm := get("ConfigMap/router-config")
	p, err := compiler.CompileSources([]compiler.Source{{Name: "router.yaml", Data: []byte(cm.Data["router.yaml"])}})
	if err != nil {
		t.Fatalf("the ConfigMap's router.yaml does not compile:\n%v", err)
	}
	_, listen, err := net.SplitHostPort(p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	listenPort, _ := strconv.Atoi(listen)

	router := get("Deployment/router").Spec.Template.Spec
	if len(router.Containers) != 1 {
		t.Fatalf("the router pod has %d containers, want 1", len(router.Containers))
	}
	c := router.Containers[0]
	port := func(ref any) int {
		t.Helper()
		for _, cp := range c.Ports {
			if ref == cp.Name || ref == cp.ContainerPort {
				return cp.ContainerPort
			}
		}
		t.Fatalf("probe port %v is none of the container's ports", ref)
		return 0
	}
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if pr.p == nil || pr.p.HTTPGet == nil || pr.p.HTTPGet.Path != pr.path {
			t.Errorf("the %s probe is not an httpGet of %s", pr.name, pr.path)
			continue
		}
		if got := port(pr.p.HTTPGet.Port); got != listenPort {
			t.Errorf("%s probe on port %d, the config listens on %d", pr.name, got, listenPort)
		}
	}
	if c.Lifecycle != nil {
		t.Errorf("the router has a lifecycle hook %v; shutdown_delay_secs makes preStop unneeded", c.Lifecycle)
	}
	nonRoot := func(s security) bool {
		return s.RunAsNonRoot != nil && *s.RunAsNonRoot && s.RunAsUser != nil && *s.RunAsUser != 0
	}
	if !nonRoot(router.SecurityContext) && !nonRoot(c.SecurityContext) {
		t.Error("the router pod does not set runAsNonRoot with a non-zero runAsUser")
	}
	if need := p.ShutdownDelaySecs + p.ShutdownGraceSecs; router.TerminationGracePeriodSeconds < need {
		t.Errorf("terminationGracePeriodSeconds %d is under shutdown_delay_secs + shutdown_grace_secs = %d", router.TerminationGracePeriodSeconds, need)
	}
	if p.ShutdownDelaySecs < 5 {
		t.Errorf("shutdown_delay_secs %d: Services need 5 s or more to stop sending to a terminating pod", p.ShutdownDelaySecs)
	}
	if i := slices.Index(c.Args, "--config"); i < 0 || i+1 == len(c.Args) || !strings.HasPrefix(c.Args[i+1], "/etc/router/") || !slices.Contains(c.Args, "--watch") {
		t.Errorf("router args %q; want serve --config /etc/router/router.yaml --watch", c.Args)
	}

	// Every DNS source names a headless Service, on the port it declares.
	if len(p.EnginesFromDNS) == 0 {
		t.Fatal("the config discovers no engines from DNS")
	}
	for _, src := range p.EnginesFromDNS {
		svc := get("Service/" + strings.Split(src.Name, ".")[0])
		if svc.Spec.ClusterIP != "None" {
			t.Errorf("Service %s has clusterIP %q; engines_from_dns needs a headless Service (None), whose name resolves to every pod", svc.Metadata.Name, svc.Spec.ClusterIP)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp svcPort) bool { return sp.Port == src.Port }) {
			t.Errorf("Service %s has no port %d, the engines' port in engines_from_dns", svc.Metadata.Name, src.Port)
		}
	}
	// The binding store is the Valkey Service.
	if p.Bindings == nil || p.Bindings.Store != plan.BindingsRedis {
		t.Fatal("the config shares no bindings: several replicas need bindings.store redis")
	}
	host, bport, _ := net.SplitHostPort(p.Bindings.Address)
	svc := get("Service/" + host)
	if n, _ := strconv.Atoi(bport); !slices.ContainsFunc(svc.Spec.Ports, func(sp svcPort) bool { return sp.Port == n }) {
		t.Errorf("Service %s has no port %s, bindings.address's", host, bport)
	}
	if nonRoot := get("Deployment/valkey").Spec.Template.Spec.SecurityContext; nonRoot.RunAsNonRoot == nil || !*nonRoot.RunAsNonRoot {
		t.Error("valkey does not run as non-root")
	}
}

// The Dockerfile's go build line, run as written, makes a static binary: an ELF with no
// program interpreter (the dynamic loader) and no dynamic section, which distroless/
// static and scratch can run. The final image is one of those, as a non-root user.
func TestDockerfileBuildsStaticNonRoot(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	m := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0) go build (.*) -o (\S+) (\./cmd/router)$`).FindStringSubmatch(df)
	if m == nil {
		t.Fatal("the Dockerfile has no `RUN CGO_ENABLED=0 go build ... -o OUT ./cmd/router` line")
	}
	stages := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	if final := stages[len(stages)-1][1]; !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage FROM %s; want distroless/static or scratch", final)
	}
	if u := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(df); u == nil || strings.HasPrefix(u[1], "0") || strings.HasPrefix(u[1], "root") {
		t.Errorf("the image's USER is %v; want a non-root uid", u)
	}
	if !strings.Contains(df, `ENTRYPOINT ["/router"]`) {
		t.Error(`the ENTRYPOINT must be ["/router"] alone, so that a pod's args (serve ...) replace the CMD`)
	}
	args := []string{"build"}
	for _, f := range regexp.MustCompile(`-ldflags="[^"]*"|\S+`).FindAllString(m[2], -1) {
		args = append(args, strings.ReplaceAll(f, `"`, ""))
	}
	out := filepath.Join(t.TempDir(), "router")
	args = append(args, "-o", out, m[4])
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), m[1])
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			t.Fatalf("the Dockerfile's build makes a dynamic binary (%s program header): it needs a C library the image lacks", prog.Type)
		}
	}
}
