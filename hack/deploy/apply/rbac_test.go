package apply_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/uninstall"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// serviceAccount impersonates a ServiceAccount of ns.
func serviceAccount(ns, name string) *rest.Config {
	return testenv.As(env.Config, "system:serviceaccount:"+ns+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+ns)
}

// TestOperatorRunsUnderTheChartRBAC installs the chart and runs the whole
// operator as the chart's operator ServiceAccount, leader election on: the
// Roles the chart renders (generated from the controllers' RBAC markers,
// plus its leader-election Role) must be enough for every controller — a
// Lease, the CA Secret, a DaemonSet, Node labels, BladeConfig status and
// finalizer, an agent's certificate — and the cleanup hook's ServiceAccount
// enough for the uninstall.
func TestOperatorRunsUnderTheChartRBAC(t *testing.T) {
	testenv.Need(t)
	const ns, release = "kb-rbac", "kubeblade"
	ch, err := render.Load(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(ctx(t), ch, render.Options{ReleaseName: release, Namespace: ns, Values: map[string]any{
		"bladeConfig": map[string]any{"name": "rbac", "spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"kbtest": "rbac"}},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	logf.SetLogger(logr.Discard())
	createNamespace(t, ns)
	applyAll(t, res.Objects)
	applyAll(t, res.Hooks)
	admin, err := client.New(env.Config, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rbac-blade", Labels: map[string]string{"kbtest": "rbac"}}}
	if err := admin.Create(ctx(t), node); err != nil {
		t.Fatal(err)
	}
	// The chart's operator policies name its ServiceAccount and namespace:
	// once they refuse an attack by it, everything below runs under them.
	policiesInForce(t, serviceAccount(ns, "kubeblade-operator"), ns, node.Name)

	o := operator.DefaultOptions()
	o.Namespace = ns
	o.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:test"
	skip := true
	mgr, err := ctrl.NewManager(serviceAccount(ns, "kubeblade-operator"), operator.ManagerOptions(o, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         true,
		Controller:             crconfig.Controller{SkipNameValidation: &skip},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.Setup(t.Context(), mgr, o); err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(run) }()
	t.Cleanup(func() {
		stop()
		<-done
	})

	start := time.Now()
	wait := func(what string, cond func(context.Context) (bool, string)) {
		t.Helper()
		testwait.Eventually(t, time.Minute, what, cond)
		t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
	}
	wait("the leader Lease", func(c context.Context) (bool, string) {
		l := &coordinationv1.Lease{}
		err := admin.Get(c, client.ObjectKey{Namespace: ns, Name: operator.LeaderElectionID}, l)
		return err == nil && l.Spec.HolderIdentity != nil, errString(err)
	})
	wait("the CA Secret", func(c context.Context) (bool, string) {
		err := admin.Get(c, client.ObjectKey{Namespace: ns, Name: casecret.DefaultName}, &corev1.Secret{})
		return err == nil, errString(err)
	})
	wait("the agent DaemonSet", func(c context.Context) (bool, string) {
		err := admin.Get(c, client.ObjectKey{Namespace: ns, Name: agentdaemonset.Name("rbac")}, &appsv1.DaemonSet{})
		return err == nil, errString(err)
	})
	wait("the Node assigned", func(c context.Context) (bool, string) {
		n := &corev1.Node{}
		err := admin.Get(c, client.ObjectKey{Name: node.Name}, n)
		return err == nil && n.Labels[kbv1.LabelConfig] == "rbac", errString(err)
	})
	wait("the BladeConfig status and finalizer", func(c context.Context) (bool, string) {
		bc := &kbv1.BladeConfig{}
		err := admin.Get(c, client.ObjectKey{Name: "rbac"}, bc)
		return err == nil && bc.Status.MatchedNodes == 1 && len(bc.Finalizers) == 1 &&
			meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigReady) != nil, errString(err)
	})

	// The agent's serving certificate, approved and signed.
	if err := admin.Get(ctx(t), client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	agent := serviceAccount(ns, "kubeblade-agent")
	agent.Impersonate.Extra = testenv.AgentExtra(node.Name, node.UID)
	cs, err := kubernetes.NewForConfig(agent)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := csrclient.Obtain(c, cs.CertificatesV1().CertificateSigningRequests(), csrclient.Request{
		Name: "kubeblade-agent-" + node.Name, SignerName: csrclient.SignerAgentServing, CommonName: node.Name, DNSNames: []string{node.Name},
	}, nil); err != nil {
		t.Errorf("the agent's certificate: %v", err)
	}
	t.Logf("the agent's certificate after %s", time.Since(start).Round(time.Millisecond))

	// Deleting the BladeConfig: the finalizer removes the DaemonSet and
	// the label, then lets go.
	if err := admin.Delete(ctx(t), &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}}); err != nil {
		t.Fatal(err)
	}
	wait("the BladeConfig gone", func(c context.Context) (bool, string) {
		err := admin.Get(c, client.ObjectKey{Name: "rbac"}, &kbv1.BladeConfig{})
		return client.IgnoreNotFound(err) == nil && err != nil, errString(err)
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("the operator stopped with %v", err)
	}
	done <- nil

	// The uninstall, as the cleanup hook's ServiceAccount.
	cleaner, err := client.New(serviceAccount(ns, release+"-cleanup"), client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uninstall.Uninstall(ctx(t), cleaner, ns); err != nil {
		t.Errorf("uninstall as the cleanup ServiceAccount: %v", err)
	}
}

// policiesInForce waits until the operator policies refuse, as op, a dry
// run of a foreign Node label and of a DaemonSet that is not an agent's:
// the API server loads policies asynchronously.
func policiesInForce(t *testing.T, op *rest.Config, ns, node string) {
	t.Helper()
	c, err := client.New(op, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "not-an-agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "ghcr.io/evil/x:v1"}}},
			},
		},
	}
	for policy, attempt := range map[string]func(context.Context) error{
		"kubeblade-operator-nodes": func(c2 context.Context) error {
			return c.Patch(c2, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
				client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"evil.example/x":"1"}}}`)), client.DryRunAll)
		},
		"kubeblade-operator-daemonsets": func(c2 context.Context) error { return c.Create(c2, ds.DeepCopy(), client.DryRunAll) },
	} {
		testwait.Eventually(t, time.Minute, policy+" in force for the chart's operator", func(c2 context.Context) (bool, string) {
			err := attempt(c2)
			return err != nil && strings.Contains(err.Error(), policy), errString(err)
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
