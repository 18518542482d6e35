//go:build !nokube

package agentd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: []string{"config/crd/bases"}}, func(e *testenv.Env) { env = e }))
}

// newClient is a controller-runtime client for the test's Nodes and BladeConfigs.
func newClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKubernetesModeStartsWithTheAssignedBladeConfig(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := newClient(t)
	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "boot"}}
	bc.Spec.Agent.CriticalCelsius = 70
	bc.Spec.Agent.Hardware.Backend = agentconfigv1.BackendSimulated
	dir := t.TempDir()
	bc.Spec.Agent.Metrics.BindAddress = "127.0.0.1:0"
	// A file name, as a BladeConfig may give it: the host's own override
	// below must win over it.
	bc.Spec.Agent.GRPC.SocketPath = "agent.sock"
	if err := c.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "boot-blade", Labels: map[string]string{v1alpha1.LabelConfig: "boot"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	// The local config asks for the linux backend, on a machine without
	// blade hardware: the agent must start with the BladeConfig's instead.
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte("hardware:\n  backend: linux\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	started := make(chan *Daemon, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(runCtx, Options{
			ConfigPath: cfgPath, StateDir: filepath.Join(dir, "state"),
			// A host's own override wins over the shared BladeConfig.
			Environ:    []string{"KUBEBLADE_GRPC_SOCKET_PATH=" + filepath.Join(dir, "override.sock")},
			Kubernetes: &KubernetesOptions{Config: env.Config, NodeName: "boot-blade"},
			Started:    func(d *Daemon) { started <- d },
		})
	}()
	var d *Daemon
	select {
	case d = <-started:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not start")
	}
	defer func() {
		cancel()
		<-errc
	}()
	if d.Config.Hardware.Backend != agentconfigv1.BackendSimulated || d.Config.CriticalCelsius != 70 || d.Kube == nil {
		t.Fatalf("started with %+v, want the BladeConfig's", d.Config)
	}
	if d.GRPCSocket != filepath.Join(dir, "override.sock") {
		t.Fatalf("gRPC socket %q, want the environment's override", d.GRPCSocket)
	}
	if got := d.Agent.Status().Settings.CriticalCelsius; got != 70 {
		t.Fatalf("agent threshold = %v, want 70", got)
	}
	testwait.Eventually(t, 30*time.Second, "the Blade to report the BladeConfig", func(ctx context.Context) (bool, string) {
		bl := &v1alpha1.Blade{}
		if err := c.Get(ctx, client.ObjectKey{Name: "boot-blade"}, bl); err != nil {
			return false, err.Error()
		}
		return bl.Status.Config != nil && bl.Status.Config.Name == "boot", fmt.Sprintf("%+v", bl.Status.Config)
	})
}

// TestKubernetesModeIsNotReadyUntilTheAssignedBladeConfigIsApplied: an
// agent whose Node names a BladeConfig it cannot read yet protects the blade
// with its local config but stays unready, so a rollout does not count it
// as done before it runs the cluster's config; it turns ready once the
// BladeConfig appears and is applied.
func TestKubernetesModeIsNotReadyUntilTheAssignedBladeConfigIsApplied(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := newClient(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late-blade", Labels: map[string]string{v1alpha1.LabelConfig: "late"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, "", func(o *Options) {
		o.Kubernetes = &KubernetesOptions{Config: env.Config, NodeName: "late-blade"}
	})
	web := &http.Client{Timeout: 10 * time.Second}
	readyz := "http://" + r.d.MetricsAddr + "/readyz?verbose"
	testwait.Eventually(t, 30*time.Second, "the hardware loop to run", func(context.Context) (bool, string) {
		_, body := httpGet(t, web, readyz)
		return strings.Contains(body, "[+] hardware ok"), body
	})
	if code, body := httpGet(t, web, readyz); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-] config failed: no config from the cluster applied yet") {
		t.Fatalf("/readyz with the BladeConfig missing = %d %q, want 503 naming the config", code, body)
	}

	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "late"}}
	bc.Spec.Agent.CriticalCelsius = 72
	bc.Spec.Agent.Hardware.Backend = agentconfigv1.BackendSimulated
	if err := c.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 30*time.Second, "/readyz to pass once the BladeConfig is applied", func(context.Context) (bool, string) {
		code, body := httpGet(t, web, readyz)
		return code == http.StatusOK, body
	})
	if got := r.d.Agent.Status().Settings.CriticalCelsius; got != 72 {
		t.Fatalf("agent threshold once ready = %v, want the BladeConfig's 72", got)
	}
}

// With the API server not answering (a listener that accepts connections
// and never replies), the agent starts within its bootstrap timeout with
// its local config and runs the blade on it: the blade's safety never
// waits for the cluster.
func TestKubernetesModeStartsWithTheLocalConfigWhenTheClusterDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	began := time.Now()
	r := startDaemon(t, "criticalCelsius: 66\n", func(o *Options) {
		o.Kubernetes = &KubernetesOptions{NodeName: "silent-cluster",
			Config: &rest.Config{Host: "https://" + ln.Addr().String(), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}}
	})
	if took := time.Since(began); took > bootstrapTimeout+10*time.Second {
		t.Errorf("the agent started %s after Run, want about its bootstrap timeout %s", took, bootstrapTimeout)
	}
	if r.d.Config.CriticalCelsius != 66 || r.d.Kube == nil {
		t.Fatalf("started with %+v, want the local config (critical 66) and the Kubernetes side running", r.d.Config)
	}
	testwait.Eventually(t, 30*time.Second, "the hardware loop to run on the local config", func(context.Context) (bool, string) {
		s := r.d.Agent.Status()
		return s.Running && s.Settings.CriticalCelsius == 66, fmt.Sprintf("running %t, %+v", s.Running, s.Settings)
	})
}
