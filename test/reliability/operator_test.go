package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// manager is one operator replica run in-process through operator.Setup,
// exactly as cmd/kubeblade-operator wires it.
type manager struct {
	mgr    ctrl.Manager
	cancel context.CancelFunc
	done   chan struct{}
}

func startOperator(t *testing.T, id string, leaderElection bool) *manager {
	t.Helper()
	cfg := rest.CopyConfig(cp.cfg)
	cfg.QPS, cfg.Burst = 200, 400
	o := operator.DefaultOptions()
	o.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:reliability"
	base := ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         leaderElection,
		LeaderElectionID:       "reliability-" + id,
		// Short leases, so a lost leader is replaced in seconds. Losing
		// the leader is a crash: the lease is not released.
		LeaseDuration: ptr.To(4 * time.Second),
		RenewDeadline: ptr.To(3 * time.Second),
		RetryPeriod:   ptr.To(500 * time.Millisecond),
		// Several replicas in one process register the same controllers.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	mgr, err := ctrl.NewManager(cfg, operator.ManagerOptions(o, base))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := operator.Setup(ctx, mgr, o); err != nil {
		cancel()
		t.Fatal(err)
	}
	m := &manager{mgr: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = mgr.Start(ctx)
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *manager) stop() {
	m.cancel()
	<-m.done
}

// bladeConfig creates a BladeConfig for the Nodes labelled
// reliability=<selector> and returns its name.
func bladeConfig(t *testing.T, name, selector string) {
	t.Helper()
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kbv1.BladeConfigSpec{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"reliability": selector}},
	}}
	bc.Spec.Agent.LEDs.IdleColor = "#00ff00"
	if err := k8s.Create(context.Background(), bc); err != nil {
		t.Fatal(err)
	}
}

func waitDaemonSet(t *testing.T, config string, timeout time.Duration) {
	t.Helper()
	testwait.Eventually(t, timeout, "DaemonSet for BladeConfig "+config, func(context.Context) (bool, string) {
		ds := &appsv1.DaemonSet{}
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "kubeblade-system", Name: agentdaemonset.NamePrefix + config}, ds)
		return err == nil, fmt.Sprint(err)
	})
}

// TestEtcdRestart stops etcd under a running agent and operator, changes
// the blade while it is down, and expects everything stored before to
// survive and both to carry on afterwards: the blade's changes and Events
// arrive, a new BladeConfig gets its DaemonSet, the Node is assigned, and
// the agent applies that config.
func TestEtcdRestart(t *testing.T) {
	needCP(t)
	downFor := durationEnv(t, "RELIABILITY_ETCD_DOWN", 10*time.Second)
	summary.fault(t, fmt.Sprintf("etcd restarted (down %s)", downFor))
	b := startBlade(t, "rel-etcd", map[string]string{"reliability": "etcd"})
	startOperator(t, "etcd", false)
	before, err := b.getBlade()
	if err != nil {
		t.Fatal(err)
	}

	if err := cp.stopEtcd(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cp.startEtcd()
		}
	})
	sub := b.agent.Subscribe(64)
	defer sub.Close()
	b.sim.PressButton()
	b.sim.SetPower(hardware.PowerPoEOrUSBC)
	testwait.Eventually(t, 10*time.Second, "identify on locally", func(context.Context) (bool, string) { return b.agent.Status().Identify, "" })
	time.Sleep(downFor) // the outage itself: etcd stays down this long
	if err := cp.startEtcd(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	back := time.Now()

	after, err := b.getBladeEventually(t)
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		summary.lose(t, "Blade %s was recreated (uid %s → %s): etcd data did not survive", b.node, before.UID, after.UID)
	}
	testwait.Eventually(t, 60*time.Second, "the blade's changes during the etcd outage", func(context.Context) (bool, string) {
		n, err := b.getNode()
		if err != nil {
			return false, err.Error()
		}
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		return n.Labels[kbv1.LabelPower] == string(hardware.PowerPoEOrUSBC) && bl.Status.Identify, fmt.Sprintf("%v %+v", n.Labels, bl.Status)
	})
	for _, r := range []core.Reason{core.ReasonButtonPressed, core.ReasonIdentifyStarted, core.ReasonPowerSourceChanged} {
		testwait.Eventually(t, 60*time.Second, "Event "+string(r), func(context.Context) (bool, string) {
			got, err := events(b.node, string(r))
			return err == nil && len(got) > 0, fmt.Sprint(err)
		})
	}
	bladeConfig(t, "rel-etcd", "etcd")
	waitDaemonSet(t, "rel-etcd", 60*time.Second)
	testwait.Eventually(t, 60*time.Second, "Node assigned and config applied by the agent", func(context.Context) (bool, string) {
		n, err := b.getNode()
		if err != nil {
			return false, err.Error()
		}
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		return n.Labels[kbv1.LabelConfig] == "rel-etcd" && bl.Status.Config != nil && bl.Status.Config.Name == "rel-etcd",
			fmt.Sprintf("label=%q config=%+v", n.Labels[kbv1.LabelConfig], bl.Status.Config)
	})
	summary.note("etcd down %s: agent and operator caught up %s after it returned (Blade kept its UID)",
		downFor, time.Since(back).Round(time.Millisecond))
}

func (b *blade) getBladeEventually(t *testing.T) (*kbv1.Blade, error) {
	var bl *kbv1.Blade
	var err error
	testwait.Eventually(t, 60*time.Second, "Blade readable after etcd restart", func(context.Context) (bool, string) {
		bl, err = b.getBlade()
		return err == nil, fmt.Sprint(err)
	})
	return bl, err
}

// TestOperatorLeaderLoss runs two operator replicas with leader election,
// stops the leader without releasing its lease (a crash), and expects the
// other to take over and keep reconciling.
func TestOperatorLeaderLoss(t *testing.T) {
	needCP(t)
	summary.fault(t, "operator leader lost")
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rel-leader", Labels: map[string]string{"reliability": "leader"}}}
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	a := startOperator(t, "leader", true)
	b := startOperator(t, "leader", true)
	var leader, follower *manager
	select {
	case <-a.mgr.Elected():
		leader, follower = a, b
	case <-b.mgr.Elected():
		leader, follower = b, a
	case <-time.After(60 * time.Second):
		t.Fatal("no replica became leader")
	}
	bladeConfig(t, "rel-leader-1", "leader")
	waitDaemonSet(t, "rel-leader-1", 60*time.Second)

	lost := time.Now()
	leader.stop()
	select {
	case <-follower.mgr.Elected():
	case <-time.After(60 * time.Second):
		t.Fatal("the second replica never took over")
	}
	took := time.Since(lost)
	bladeConfig(t, "rel-leader-2", "leader-2")
	waitDaemonSet(t, "rel-leader-2", 60*time.Second)
	waitDaemonSet(t, "rel-leader-1", 5*time.Second)
	testwait.Eventually(t, 60*time.Second, "Node still assigned", func(context.Context) (bool, string) {
		got := &corev1.Node{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: n.Name}, got); err != nil {
			return false, err.Error()
		}
		return got.Labels[kbv1.LabelConfig] == "rel-leader-1", got.Labels[kbv1.LabelConfig]
	})
	summary.note("operator leader lost: the other replica led after %s (lease 4s) and created the next DaemonSet", took.Round(time.Millisecond))
}
