package bladectl

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The dashboard's page and stream are tested in internal/dashboard (with
// this command, in Chromium); these are its command line's refusals.

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// deadKubeconfig names an API server that is not there: enough for the
// command to get past loading its configuration.
func deadKubeconfig(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(path, "gone", map[string]*rest.Config{"gone": {Host: "https://" + addr}}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDashboardRefusals(t *testing.T) {
	kc := deadKubeconfig(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name   string
		args   []string
		env    bool // KUBECONFIG set
		code   int
		stderr string
	}{
		{"no kubeconfig", []string{"dashboard"}, false, ExitFailed,
			"error: no Kubernetes configuration: use --kubeconfig, set KUBECONFIG, or create ~/.kube/config\n"},
		{"listen without a port", []string{"dashboard", "--listen", "8080"}, true, ExitUsage, `error: --listen "8080": want HOST:PORT`},
		{"port in use", []string{"dashboard", "--listen", busy.Addr().String()}, true, ExitFailed,
			"error: cannot serve on " + busy.Addr().String() + ": the address is in use; pick another with --listen"},
		{"node flags do not apply", []string{"dashboard", "--node", "blade-1"}, true, ExitUsage, "error: dashboard shows every blade"},
		{"blade flags do not apply", []string{"dashboard", "--all"}, true, ExitUsage, "error: dashboard shows every blade"},
		{"no arguments", []string{"dashboard", "blade-1"}, true, ExitUsage, `error: unknown command "blade-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			getenv := func(string) string { return "" }
			if tc.env {
				getenv = func(v string) string {
					if v == "KUBECONFIG" {
						return kc
					}
					return ""
				}
			}
			code := Main(testCtx(t), tc.args, Env{Stdout: &out, Stderr: &errb, Getenv: getenv, Argv0: "bladectl"})
			if code != tc.code || !strings.HasPrefix(errb.String(), tc.stderr) {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %q\nwant prefix %q", code, tc.code, out.String(), errb.String(), tc.stderr)
			}
		})
	}
}

// Beyond loopback only when typed, with a warning; the page then also
// answers to the machine's own name. The API server being away is said on
// the command line, not as a stack trace.
func TestDashboardExplicitListenWarns(t *testing.T) {
	kc := deadKubeconfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &safeBuffer{}, &safeBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"dashboard", "--listen", "0.0.0.0:0"}, Env{Stdout: out, Stderr: errb, Argv0: "kubectl-blade",
			Getenv: func(v string) string {
				if v == "KUBECONFIG" {
					return kc
				}
				return ""
			}})
	}()
	testwait.Eventually(t, 30*time.Second, "the warning and the unreachable API server on stderr", func(context.Context) (bool, string) {
		s := errb.String()
		return strings.Contains(s, "which other machines can reach: anyone who can open the page sees the cluster's blades and can toggle identify with YOUR Kubernetes credentials") &&
			strings.Contains(s, "error: blades: cannot reach the Kubernetes API at https://127.0.0.1:"), s
	})
	if !strings.Contains(out.String(), "Rack view of gone (https://127.0.0.1:") || !strings.Contains(out.String(), "at http://127.0.0.1:") {
		t.Errorf("stdout %q", out.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("exit %d after Ctrl-C, want 0; stderr:\n%s", code, errb)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard did not stop within 30 s of its context ending")
	}
	for _, s := range []string{"goroutine ", "panic", "StatusError"} {
		if strings.Contains(errb.String(), s) {
			t.Errorf("raw error leaked: %s", errb)
		}
	}
}
