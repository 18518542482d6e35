// Package security attacks kubeblade's least-privilege rules where they are
// enforced: the API server's admission policies (config/admission) and RBAC
// (config/rbac), on a real kube-apiserver and etcd. Every attack is tried
// with the identity an attacker would hold (the agent's pod-bound token, a
// user who may only edit BladeConfigs) and must be refused, and next to it
// the legitimate operation of that identity must still work.
//
// The gRPC roles and the TLS handshake are attacked in internal/grpcapi,
// the state directory in internal/statedir.
package security

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var (
	env    *testenv.Env
	admin  client.Client
	scheme = runtime.NewScheme()
)

// grandfathered is a BladeConfig created, with an image no longer allowed,
// before the admission policies were installed.
const grandfathered = "grandfathered"

// Manifests of the agent's access, as installed in a cluster.
var agentAccess = []string{
	"config/rbac/agent/role.yaml",
	"config/rbac/agent/role_binding.yaml",
}

const admissionDir = "config/admission"

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kbv1.AddToScheme(scheme)
	os.Exit(testenv.Main(stopOperatorAfter{m}, testenv.Options{CRDDirs: []string{"config/crd/bases"}}, func(e *testenv.Env) {
		env = e
		if err := setUp(); err != nil {
			fmt.Fprintln(os.Stderr, "security: setting up:", err)
			os.Exit(1)
		}
	}))
}

// stopOperatorAfter stops the operator once the tests ran, before the
// control plane goes: a manager still watching makes kube-apiserver's
// shutdown wait for its timeout.
type stopOperatorAfter struct{ m *testing.M }

func (s stopOperatorAfter) Run() int {
	code := s.m.Run()
	stopOperator()
	return code
}

func setUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if admin, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.AgentNamespace}}); err != nil {
		return err
	}
	old := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: grandfathered}}
	old.Spec.DaemonSet.Image = "ghcr.io/evil/kubeblade:v1"
	old.Spec.NodeSelector = selectsNothing()
	if err := admin.Create(ctx, old); err != nil {
		return err
	}
	if err := testenv.ApplyFiles(ctx, admin, agentAccess...); err != nil {
		return err
	}
	if err := startOperator(ctx); err != nil {
		return fmt.Errorf("starting the operator: %w", err)
	}
	files, err := os.ReadDir(testenv.RepoRoot() + "/" + admissionDir)
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".yaml") {
			if err := testenv.ApplyFiles(ctx, admin, admissionDir+"/"+f.Name()); err != nil {
				return err
			}
		}
	}
	return waitInForce(ctx)
}

// waitInForce returns once every policy refuses a dry-run attack: the API
// server compiles and loads policies asynchronously.
func waitInForce(ctx context.Context) error {
	probe := as(agentOf("probe-a", "00000000-0000-0000-0000-00000000000a"))
	dry := client.DryRunAll
	attempts := map[string]func() error{
		"kubeblade-agent-own-node": func() error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "probe-b"}}
			_ = admin.Create(ctx, n)
			return probe.Patch(ctx, n, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"kubeblade.io/soc":"x"}}}`)), dry)
		},
		"kubeblade-agent-own-blade": func() error {
			return probe.Create(ctx, &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "probe-b"}}, dry)
		},
		"kubeblade-agent-events": func() error {
			return probe.Create(ctx, &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "kube-system"},
				EventTime:  metav1.NowMicro(), ReportingController: "x", ReportingInstance: "x", Action: "x", Reason: "x", Type: "Normal",
			}, dry)
		},
		"kubeblade-operator-nodes": func() error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "probe-b"}}
			_ = admin.Create(ctx, n)
			return as(operatorConfig()).Patch(ctx, n, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"probe":"x"}}}`)), dry)
		},
		"kubeblade-operator-daemonsets": func() error {
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: testenv.AgentNamespace},
				Spec: appsv1.DaemonSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "x"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"probe": "x"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
					},
				},
			}
			return as(operatorConfig()).Create(ctx, ds, dry)
		},
		"kubeblade-agent-images": func() error {
			bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
			bc.Spec.DaemonSet.Image = "ghcr.io/evil/kubeblade:v1"
			return admin.Create(ctx, bc, dry)
		},
	}
	for policy, attempt := range attempts {
		err := testwait.Poll(ctx, time.Minute, func(context.Context) (bool, string) {
			err := attempt()
			return err != nil && strings.Contains(err.Error(), policy), fmt.Sprint(err)
		})
		if err != nil {
			return fmt.Errorf("policy %s never came into force: %w", policy, err)
		}
	}
	return nil
}

func agentOf(node, uid string) *rest.Config {
	return testenv.AsAgent(env.Config, node, types.UID(uid))
}

func as(cfg *rest.Config) client.Client {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// refused fails t unless err is the API server refusing with Forbidden (or
// Invalid) and a message containing every one of want.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want refused", what)
		return
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
		return
	}
	t.Logf("%s: refused: %v", what, err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the refusal does not say %q: %v", what, w, err)
		}
	}
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: refused, want allowed: %v", what, err)
	}
}

func readPolicyFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(testenv.RepoRoot() + "/" + admissionDir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
