package fakekubelet

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var cs kubernetes.Interface

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(e *testenv.Env) {
		cs = kubernetes.NewForConfigOrDie(e.Config)
	}))
}

// waitTimeout bounds each wait for the API server or the fake kubelet.
const waitTimeout = 20 * time.Second

func TestNodesPodsAndDeletion(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- Run(ctx, Options{Client: cs, Nodes: []string{"fk-1", "fk-2"}, Labels: map[string]string{"role": "blade"}, Heartbeat: 100 * time.Millisecond}, ready)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended early: %v", err)
	}

	n, err := cs.CoreV1().Nodes().Get(ctx, "fk-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["kubernetes.io/arch"] != "arm64" || n.Labels["role"] != "blade" {
		t.Errorf("labels %v", n.Labels)
	}
	if n.Status.Allocatable.Pods().Value() == 0 {
		t.Error("no allocatable pods: the scheduler could place nothing")
	}
	// A condition the agent owns survives heartbeats.
	if _, err := cs.CoreV1().Nodes().PatchStatus(ctx, "fk-1", []byte(`{"status":{"conditions":[{"type":"BladeThermalCritical","status":"True","reason":"Hot"}]}}`)); err != nil {
		t.Fatal(err)
	}
	first := ready0(t, n)
	testwait.Eventually(t, waitTimeout, "heartbeat renews Ready and the Lease", func(ctx context.Context) (bool, string) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "fk-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "fk-1", metav1.GetOptions{})
		if err != nil {
			return false, "lease: " + err.Error()
		}
		hot := false
		for _, c := range n.Status.Conditions {
			hot = hot || (c.Type == "BladeThermalCritical" && c.Status == corev1.ConditionTrue)
		}
		return hot && ready0(t, n).LastHeartbeatTime.After(first.LastHeartbeatTime.Time) && l.Spec.RenewTime != nil,
			fmt.Sprintf("agent's condition kept: %v, Ready %+v, lease renewed %v", hot, ready0(t, n), l.Spec.RenewTime)
	})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "fk-2", Containers: []corev1.Container{{Name: "c", Image: "x"}},
			TerminationGracePeriodSeconds: ptr.To[int64](30)},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, waitTimeout, "pod running and ready", func(ctx context.Context) (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return running(p), fmt.Sprintf("%+v", p.Status)
	})
	// A graceful delete only marks the pod; the kubelet finishes it.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, waitTimeout, "terminating pod removed", func(ctx context.Context) (bool, string) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func ready0(t *testing.T, n *corev1.Node) corev1.NodeCondition {
	t.Helper()
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue {
				t.Fatalf("node %s Ready=%s", n.Name, c.Status)
			}
			return c
		}
	}
	t.Fatalf("node %s has no Ready condition", n.Name)
	return corev1.NodeCondition{}
}
