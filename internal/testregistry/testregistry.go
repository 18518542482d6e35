// Package testregistry runs the CNCF Distribution registry (the binary
// hack/registry.sh builds from github.com/distribution/distribution/v3
// cmd/registry and caches) on loopback for a test: a real OCI registry with
// its own temporary storage, optionally behind htpasswd authentication,
// stopped when the test ends. Tests that need it call Start; when the
// binary is missing they skip, or fail under make test (internal/testreq).
// Suites that run the registry under their own process supervision (the
// real-kubelet rig's, over HTTPS) take its configuration (Config), its
// environment (ProcessEnv) and its readiness check (Answers) from here.
package testregistry

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// Env names the registry binary; make sets it to hack/registry.sh's output.
const Env = "KUBEBLADE_REGISTRY"

// Registry is a running registry.
type Registry struct {
	// Host is its host:port on 127.0.0.1, plain HTTP (which go-containerregistry,
	// Helm and containerd allow for a loopback address without TLS settings).
	Host string
	// Root is its storage directory.
	Root string

	stop func()
}

// Stop stops the registry now (Start stops it when the test ends): its
// address then refuses connections, like a registry that is down.
func (r *Registry) Stop() { r.stop() }

// Options change how the registry runs.
type Options struct {
	// Htpasswd, when set, is an htpasswd file's content (bcrypt entries, the
	// only kind Distribution accepts): every request must then authenticate.
	Htpasswd string
}

// A user and password for registries that require authentication, with
// TestHtpasswd the htpasswd line for them (bcrypt, cost 10, made once with
// golang.org/x/crypto/bcrypt.GenerateFromPassword).
const (
	TestUser     = "kubeblade"
	TestPassword = "kubeblade-test-password"
	TestHtpasswd = TestUser + ":$2a$10$RQsvXkyoi9DZuRGHOOrxa.ZNb0u8KYqldl99nqHmO.N6FwTwakGXi\n"
)

// Binary returns the registry binary from $KUBEBLADE_REGISTRY, or ends the
// test through testreq when it is not there.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		testreq.Unavailable(t, "%s is not set: run hack/registry.sh (it builds the Distribution registry once) and set %s to its output", Env, Env)
	}
	if _, err := os.Stat(bin); err != nil {
		testreq.Unavailable(t, "%s=%s: %v", Env, bin, err)
	}
	return bin
}

// Config is one registry's configuration file (the format of Distribution
// v3, docs/content/about/configuration.md in its repository).
type Config struct {
	// Root is the storage directory.
	Root string
	// Addr is the host:port it listens on.
	Addr string
	// HtpasswdFile, when set, names an htpasswd file (bcrypt entries):
	// every request must then authenticate.
	HtpasswdFile string
	// TLSCert and TLSKey, when set, are PEM files it serves HTTPS with;
	// without them it serves plain HTTP.
	TLSCert, TLSKey string
}

// YAML is the configuration file's content.
func (c Config) YAML() string {
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, c.Root, c.Addr)
	if c.TLSCert != "" {
		cfg += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", c.TLSCert, c.TLSKey)
	}
	if c.HtpasswdFile != "" {
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: kubeblade-test\n    path: %s\n", c.HtpasswdFile)
	}
	return cfg
}

// ProcessEnv is what the registry's environment needs besides the
// caller's: Distribution v3 turns its OpenTelemetry exporters on by default,
// and nothing listens for them here.
var ProcessEnv = []string{"OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none"}

// Answers reports whether the registry at base (http:// or https://
// host:port) answers /v2/, and if not, why: 200, or 401 from a registry
// that wants credentials, is an answer.
func Answers(ctx context.Context, c *http.Client, base string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v2/", nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized, resp.Status
}

// LoopbackAddr returns 127.0.0.1:<port> for a port nothing listens on now.
func LoopbackAddr() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// Start runs a registry (plain HTTP) until the test ends and returns once
// it answers /v2/.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	host, err := LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Root: filepath.Join(dir, "storage"), Addr: host}
	if opts.Htpasswd != "" {
		c.HtpasswdFile = filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(c.HtpasswdFile, []byte(opts.Htpasswd), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(c.YAML()), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "registry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), ProcessEnv...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
			logf.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
				t.Logf("registry log:\n%s", b)
			}
		}
	})
	testwait.Eventually(t, time.Minute, "registry at "+host+" to answer /v2/", func(ctx context.Context) (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			t.Fatalf("registry exited: %v\n%s", err, b)
		default:
		}
		return Answers(ctx, http.DefaultClient, "http://"+host)
	})
	return &Registry{Host: host, Root: c.Root, stop: stop}
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ref returns host/path for a repository in the registry.
func (r *Registry) Ref(path string) string {
	return r.Host + "/" + strings.TrimPrefix(path, "/")
}
