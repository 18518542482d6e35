package operator_test

import (
	"context"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/daemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/status"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func getDS(ctx context.Context, e *optest.Env, config string) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	err := e.Client.Get(ctx, types.NamespacedName{Namespace: optest.Namespace, Name: agentdaemonset.Name(config)}, ds)
	return ds, err
}

// TestBladeConfigLifecycle follows two overlapping BladeConfigs through
// every controller: placement, labels, DaemonSets, status with its
// conflict, rollout and applied counts, and the cleanup on deletion.
func TestBladeConfigLifecycle(t *testing.T) {
	e := suite.Need(t)
	sel := map[string]string{"kbtest": "life"}
	gold := map[string]string{"kbtest": "life", "tier": "gold"}
	e.CreateAll(t,
		optest.Node("life-1", sel),
		optest.Node("life-2", gold),
		optest.Node("life-3", map[string]string{"kbtest": "life", kbv1.LabelBlade: "false"}),
		optest.Config("life-low", 0, sel),
		optest.Config("life-high", 10, gold),
	)
	e.WaitConfigLabels(t, map[string]string{"life-1": "life-low", "life-2": "life-high", "life-3": ""})
	low := e.WaitStatus(t, "life-low", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionTrue(bc.Status.Conditions, kbv1.BladeConfigConflict) &&
			slices.Equal(bc.Status.ConflictingNodes, []string{"life-2"}) && bc.Status.MatchedNodes == 1 &&
			bc.Status.DaemonSet.Name == agentdaemonset.Name("life-low") &&
			// The finalizer controller is independent of the status
			// controller: its write may land after the status is complete.
			slices.Contains(bc.Finalizers, kbv1.FinalizerCleanup)
	})
	if c := meta.FindStatusCondition(low.Status.Conditions, kbv1.BladeConfigConflict); !strings.Contains(c.Message, "life-2 (life-high)") {
		t.Errorf("Conflict message %q does not name life-2 (life-high)", c.Message)
	}
	if !slices.Equal(low.Finalizers, []string{kbv1.FinalizerCleanup}) {
		t.Errorf("finalizers %v", low.Finalizers)
	}

	// Kubernetes' DaemonSet controller (not in envtest) and the agent.
	ds, err := getDS(optest.Ctx(t), e, "life-low")
	if err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberReady: 1, CurrentNumberScheduled: 1, NumberAvailable: 1}
	if err := e.Client.Status().Update(optest.Ctx(t), ds); err != nil {
		t.Fatal(err)
	}
	b := &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "life-1"}}
	e.CreateAll(t, b)
	b.Status.NodeName = "life-1"
	b.Status.Config = &kbv1.AppliedConfig{Name: "life-low", Generation: low.Generation}
	if err := e.Client.Status().Update(optest.Ctx(t), b); err != nil {
		t.Fatal(err)
	}
	e.WaitStatus(t, "life-low", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionTrue(bc.Status.Conditions, kbv1.BladeConfigReady) && bc.Status.AppliedNodes == 1
	})

	// Deleting the high config hands its node to the low one and takes
	// its DaemonSet along.
	if err := e.Client.Delete(optest.Ctx(t), e.GetConfig(t, "life-high")); err != nil {
		t.Fatal(err)
	}
	e.WaitConfigLabels(t, map[string]string{"life-1": "life-low", "life-2": "life-low"})
	testwait.Eventually(t, optest.Timeout, "the DaemonSet of life-high gone", func(ctx context.Context) (bool, string) {
		_, err := getDS(ctx, e, "life-high")
		if err == nil {
			return false, "still there"
		}
		return client.IgnoreNotFound(err) == nil, err.Error()
	})
	e.WaitStatus(t, "life-low", func(bc *kbv1.BladeConfig) bool {
		return bc.Status.MatchedNodes == 2 && meta.IsStatusConditionFalse(bc.Status.Conditions, kbv1.BladeConfigConflict)
	})
}

// TestAgentCertificateThroughCSR runs the agent's side (package csrclient)
// against the approver, the signer and the CA rotation together.
func TestAgentCertificateThroughCSR(t *testing.T) {
	e := suite.Need(t)
	e.WithAgentRBAC(t)
	e.NodeWithIP(t, "csr-agent-node", "192.0.2.20")
	dir := t.TempDir()
	cs := kubernetes.NewForConfigOrDie(e.Impersonate("csr-agent-node"))
	c, cancel := context.WithTimeout(t.Context(), optest.Timeout)
	defer cancel()
	opts := csrclient.Options{CSRs: cs.CertificatesV1().CertificateSigningRequests(), Nodes: cs.CoreV1().Nodes(), Dir: dir, NodeName: "csr-agent-node"}
	src, err := csrclient.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := src.ServingCertificate()
	if err != nil || cert == nil {
		t.Fatal(err)
	}
	pool, _ := src.ClientCAs()
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "csr-agent-node", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("serving certificate: %v", err)
	}
	if !cert.Leaf.IPAddresses[len(cert.Leaf.IPAddresses)-1].Equal(net.ParseIP("192.0.2.20")) {
		t.Errorf("IPs %v lack the node's address", cert.Leaf.IPAddresses)
	}
	// A second start reuses the stored certificate: no new request.
	src2, err := csrclient.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	cert2, _ := src2.ServingCertificate()
	if !cert2.Leaf.Equal(cert.Leaf) {
		t.Error("restart requested a new certificate although the stored one is valid")
	}
	if time.Until(cert.Leaf.NotAfter) < 24*time.Hour {
		t.Errorf("certificate expires at %s", cert.Leaf.NotAfter)
	}
}

// TestRefusedDaemonSetMakesTheConfigDegraded: a BladeConfig the CRD accepts
// but whose DaemonSet the API server refuses (requests above limits) is
// Degraded with the API server's words at its current generation, with a
// Warning Event, until it is fixed — the DaemonSet controller's error
// reaches the status controller's conditions.
func TestRefusedDaemonSetMakesTheConfigDegraded(t *testing.T) {
	e := suite.Need(t)
	bc := optest.Config("refused", 0, map[string]string{"kbtest": "refused"})
	bc.Spec.DaemonSet.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}
	e.CreateAll(t, bc)
	bc = e.WaitStatus(t, "refused", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionTrue(bc.Status.Conditions, kbv1.BladeConfigDegraded)
	})
	c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded)
	if c.Reason != status.ReasonApplyFailed || !strings.Contains(c.Message, "must be less than or equal to cpu limit") ||
		!strings.Contains(c.Message, daemonset.ControllerName) {
		t.Errorf("Degraded %s: %q, want %s naming the controller and the API server's reason", c.Reason, c.Message, status.ReasonApplyFailed)
	}
	if c.ObservedGeneration != bc.Generation {
		t.Errorf("Degraded at generation %d, the config is at %d", c.ObservedGeneration, bc.Generation)
	}
	for _, typ := range []string{kbv1.BladeConfigReady, kbv1.BladeConfigProgressing} {
		if got := meta.FindStatusCondition(bc.Status.Conditions, typ); got == nil || got.Status != metav1.ConditionFalse || got.Reason != status.ReasonApplyFailed {
			t.Errorf("%s = %+v, want False/%s: nothing progresses while the DaemonSet is refused", typ, got, status.ReasonApplyFailed)
		}
	}
	if note := e.WaitEvent(t, "BladeConfig", "refused", status.ReasonApplyFailed); !strings.Contains(note, "must be less than or equal to cpu limit") {
		t.Errorf("Warning Event %q lacks the API server's reason", note)
	}

	// The fix clears Degraded at the new generation, and the DaemonSet exists.
	e.UpdateConfig(t, "refused", func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.Resources = nil })
	e.WaitStatus(t, "refused", func(bc *kbv1.BladeConfig) bool {
		return meta.IsStatusConditionFalse(bc.Status.Conditions, kbv1.BladeConfigDegraded)
	})
	if _, err := getDS(optest.Ctx(t), e, "refused"); err != nil {
		t.Errorf("DaemonSet after the fix: %v", err)
	}
}
