package agentd

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/opsserver"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// fakeKube is a Kubernetes side whose first config arrives when the test
// says so.
type fakeKube struct{ applied atomic.Bool }

func (f *fakeKube) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeKube) ConfigApplied() bool           { return f.applied.Load() }

// TestReadinessWaitsForTheHardwareLoopAndTheFirstConfig: /readyz keeps a
// starting agent out of service until its loop has read the hardware and
// the first config from the cluster is applied, while /healthz passes all
// along, so the kubelet waits for a starting agent instead of restarting it.
func TestReadinessWaitsForTheHardwareLoopAndTheFirstConfig(t *testing.T) {
	checked, _, err := config.LoadChecked("", nil)
	if err != nil {
		t.Fatal(err)
	}
	blade := simulated.New(simulated.Options{})
	a, err := agent.New(agent.Options{Backend: blade, Settings: checked.Settings, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	kube := &fakeKube{}
	srv, err := opsserver.Listen(opsserver.Options{Address: "127.0.0.1:0", Live: liveChecks(a), Ready: readyChecks(a, kube)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	ran := make(chan error, 1)
	running := false
	t.Cleanup(func() {
		cancel()
		<-served
		if running {
			<-ran // the safe exit
		}
	})
	web := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + srv.Addr().String()

	type want struct {
		code   int
		passed []string
		failed []string
	}
	check := func(t *testing.T, path string, w want) (bool, string) {
		t.Helper()
		code, body := httpGet(t, web, url+path+"?verbose")
		ok := code == w.code
		for _, n := range w.passed {
			ok = ok && strings.Contains(body, "[+] "+n+" ok")
		}
		for _, n := range w.failed {
			ok = ok && strings.Contains(body, "[-] "+n+" failed")
		}
		return ok, body
	}
	steps := []struct {
		name  string
		do    func()
		ready want
	}{{
		name: "backend not yet read, no config",
		do:   func() {},
		ready: want{code: http.StatusServiceUnavailable, passed: []string{"agent-loop"},
			failed: []string{"hardware", "config"}},
	}, {
		name: "loop running, no config",
		do: func() {
			running = true
			go func() { ran <- a.Run(ctx) }()
		},
		ready: want{code: http.StatusServiceUnavailable, passed: []string{"agent-loop", "hardware"},
			failed: []string{"config"}},
	}, {
		name:  "first config applied",
		do:    func() { kube.applied.Store(true) },
		ready: want{code: http.StatusOK, passed: []string{"agent-loop", "hardware", "config"}},
	}}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			// Steps that start something reach their state eventually;
			// the ones that do not hold from the first poll.
			testwait.Eventually(t, 30*time.Second, "/readyz to report "+s.name, func(context.Context) (bool, string) {
				return check(t, "/readyz", s.ready)
			})
			if ok, body := check(t, "/healthz", want{code: http.StatusOK, passed: []string{"agent-loop"}}); !ok {
				t.Errorf("/healthz while %s = %q, want 200: a starting agent is alive", s.name, body)
			}
		})
	}
}
