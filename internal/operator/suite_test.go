package operator_test

import (
	"context"
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/cleanup"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

const ns = "kubeblade-system"

var (
	env  *testenv.Env
	k8s  client.Client // direct, uncached
	opts operator.Options
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: []string{"config/crd/bases"}}, func(e *testenv.Env) {
		env = e
		if err := start(); err != nil {
			fmt.Fprintln(os.Stderr, "starting the operator:", err)
			os.Exit(1)
		}
	}))
}

func start() error {
	ctrl.SetLogger(logr.Discard())
	var err error
	k8s, err = client.New(env.Config, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	opts = operator.DefaultOptions()
	opts.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:test"
	mgr, err := ctrl.NewManager(env.Config, operator.ManagerOptions(opts, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptrTo(true)},
	}))
	if err != nil {
		return err
	}
	if err := operator.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
			os.Exit(1)
		}
	}()
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// eventually polls cond against the API until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func createAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(ctx(t), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

// applyYAML creates the objects of a manifest under the repository root.
func applyYAML(t *testing.T, c client.Client, rel string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range splitYAML(b) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx(t), u); err != nil {
			t.Fatalf("%s: creating %s %s: %v", rel, u.GetKind(), u.GetName(), err)
		}
	}
}

func splitYAML(b []byte) [][]byte {
	var out [][]byte
	cur := []byte{}
	for _, line := range bytesLines(b) {
		if string(line) == "---" {
			out = append(out, cur)
			cur = []byte{}
			continue
		}
		cur = append(cur, line...)
		cur = append(cur, '\n')
	}
	return append(out, cur)
}

func bytesLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}

// impersonate returns a client acting as the agent of node.
func impersonate(t *testing.T, nodeName string) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:kubeblade-system:kubeblade-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kubeblade-system", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {nodeName}},
	}
	return cfg
}

func cleanupUninstall(t *testing.T) (cleanup.Report, error) {
	return cleanup.Uninstall(ctx(t), k8s, ns)
}
