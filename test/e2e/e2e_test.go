package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/kubeevents"
	"github.com/kubeblade/kubeblade/internal/localcluster"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// identifyColor is the default identify colour, as the simulated LED
// reports it.
const identifyColor = "#100010"

func node(ctx context.Context, t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func blade(ctx context.Context, name string) (*kbv1.Blade, error) {
	b := &kbv1.Blade{}
	return b, cluster.Ctrl.Get(ctx, client.ObjectKey{Name: name}, b)
}

// events lists the Events with reason about the Node name.
func events(ctx context.Context, name, reason string) ([]corev1.Event, error) {
	l, err := cluster.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason,
	})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitEvent waits for an Event with reason about the Node, created after
// since, and checks it is an agent Event regarding the Node by UID.
func waitEvent(t *testing.T, nodeName, reason string, since time.Time) corev1.Event {
	t.Helper()
	var got corev1.Event
	n := node(t.Context(), t, nodeName)
	testwait.Eventually(t, 15*time.Second, reason+" Event for "+nodeName, func(ctx context.Context) (bool, string) {
		evs, err := events(ctx, nodeName, reason)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			// A repeated Event is a series on the first one.
			last := e.EventTime.Time
			if e.Series != nil && e.Series.LastObservedTime.After(last) {
				last = e.Series.LastObservedTime.Time
			}
			if last.Before(since.Truncate(time.Second)) {
				continue
			}
			got = e
			return true, ""
		}
		return false, fmt.Sprintf("%d older %s Event(s)", len(evs), reason)
	})
	if got.InvolvedObject.UID != n.UID || got.InvolvedObject.Kind != "Node" {
		t.Errorf("%s Event regards %s %s (UID %s), want Node %s (UID %s)", reason, got.InvolvedObject.Kind, got.InvolvedObject.Name, got.InvolvedObject.UID, nodeName, n.UID)
	}
	if got.ReportingController != kubeevents.ReportingController || got.ReportingInstance != nodeName {
		t.Errorf("%s Event reported by %q/%q, want %q/%q", reason, got.ReportingController, got.ReportingInstance, kubeevents.ReportingController, nodeName)
	}
	return got
}

func annotate(ctx context.Context, t *testing.T, nodeName, key string, value *string) {
	t.Helper()
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)
	if _, err := cluster.Client.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ptrTo(s string) *string { return &s }

func testDaemonSetRolledOut(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	ds := &appsv1.DaemonSet{}
	if err := cluster.Ctrl.Get(ctx, client.ObjectKey{Namespace: localcluster.Namespace, Name: agentdaemonset.Name(bladeConfigName)}, ds); err != nil {
		t.Fatal(err)
	}
	want := int32(len(cluster.Nodes))
	if s := ds.Status; s.DesiredNumberScheduled != want || s.NumberReady != want || s.UpdatedNumberScheduled != want {
		t.Errorf("DaemonSet desired/ready/updated = %d/%d/%d, want %d on the %d blade Nodes",
			s.DesiredNumberScheduled, s.NumberReady, s.UpdatedNumberScheduled, want, want)
	}
	pods, err := cluster.Client.CoreV1().Pods(localcluster.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector),
	})
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s on %s is %s, want Running", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		on = append(on, p.Spec.NodeName)
	}
	slices.Sort(on)
	if !slices.Equal(on, cluster.Nodes) {
		t.Errorf("agent pods run on %v, want one on each of %v", on, cluster.Nodes)
	}
	for _, n := range cluster.Nodes {
		if got := node(ctx, t, n).Labels[kbv1.LabelConfig]; got != bladeConfigName {
			t.Errorf("node %s label %s = %q, want %q", n, kbv1.LabelConfig, got, bladeConfigName)
		}
	}
}

func testBladectlGetBlades(t *testing.T) {
	needCluster(t)
	out, err := bladectl("get", "blades")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(cluster.Nodes) {
		t.Fatalf("bladectl get blades printed %d lines, want a header and %d blades:\n%s", len(lines), len(cluster.Nodes), out)
	}
	for _, col := range []string{"NODE", "TEMP", "FAN", "POWER", "STATE", "CONFIG", "AGE"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %s", lines[0], col)
		}
	}
	for i, n := range cluster.Nodes {
		f := strings.Fields(lines[1+i])
		if len(f) == 0 || f[0] != n || !slices.Contains(f, bladeConfigName) {
			t.Errorf("row %q: want blade %s with config %s", lines[1+i], n, bladeConfigName)
		}
	}

	// The same blades over their gRPC unix sockets.
	out, err = bladectl("--blade", "blade-1", "status", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res []struct {
		Blade  string `json:"blade"`
		Status struct {
			Hardware struct{ Backend string } `json:"hardware"`
			Config   string                   `json:"config"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		// One blade may be printed as an object rather than a list.
		var one struct {
			Blade  string `json:"blade"`
			Status struct {
				Hardware struct{ Backend string } `json:"hardware"`
				Config   string                   `json:"config"`
			} `json:"status"`
		}
		if err2 := json.Unmarshal([]byte(out), &one); err2 != nil {
			t.Fatalf("bladectl status -o json: %v\n%s", err, out)
		}
		res = append(res, one)
	}
	if len(res) != 1 || res[0].Status.Hardware.Backend != "simulated" || !strings.Contains(res[0].Status.Config, bladeConfigName) {
		t.Errorf("bladectl --blade blade-1 status: %s", out)
	}
}

func testIdentifyByAnnotation(t *testing.T) {
	needCluster(t)
	const name = "blade-1"
	ctx := t.Context()
	a := cluster.Agent(name)
	since := time.Now()
	annotate(ctx, t, name, kbv1.AnnotationIdentify, ptrTo("true"))
	// The edge LED blinks: it shows the identify colour half of the time.
	// The deadline bounds a broken run only (the agents run on the real
	// clock, on a loaded machine).
	testwait.Eventually(t, 30*time.Second, "edge LED blinking the identify colour", func(ctx context.Context) (bool, string) {
		st, err := a.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.EdgeLED == identifyColor, "edge LED " + st.EdgeLED
	})
	testwait.Eventually(t, 10*time.Second, "Blade status identify", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return b.Status.Identify && b.Status.LEDs.Edge.Color == identifyColor,
			fmt.Sprintf("identify=%v edge=%+v", b.Status.Identify, b.Status.LEDs.Edge)
	})
	waitEvent(t, name, "IdentifyStarted", since)

	annotate(ctx, t, name, kbv1.AnnotationIdentify, ptrTo("false"))
	testwait.Eventually(t, 10*time.Second, "Blade status identify off", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return !b.Status.Identify, fmt.Sprintf("identify=%v", b.Status.Identify)
	})
	waitEvent(t, name, "IdentifyStopped", since)
	st, err := a.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.EdgeLED == identifyColor {
		t.Errorf("edge LED still %s after identify stopped", st.EdgeLED)
	}
	annotate(ctx, t, name, kbv1.AnnotationIdentify, nil)
}

func testButtonPressedEvent(t *testing.T) {
	needCluster(t)
	const name = "blade-2"
	ctx := t.Context()
	a := cluster.Agent(name)
	// Identify asked through the annotation; the button confirms it.
	annotate(ctx, t, name, kbv1.AnnotationIdentify, ptrTo("true"))
	testwait.Eventually(t, 10*time.Second, "identify started", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		return err == nil && b.Status.Identify, ""
	})
	since := time.Now()
	if err := a.PressButton(ctx); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, name, "ButtonPressed", since)
	if ev.Type != corev1.EventTypeNormal {
		t.Errorf("ButtonPressed is a %s Event, want Normal", ev.Type)
	}
	waitEvent(t, name, "IdentifyStopped", since)
	testwait.Eventually(t, 10*time.Second, "identify annotation removed by the agent", func(ctx context.Context) (bool, string) {
		n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		v, has := n.Annotations[kbv1.AnnotationIdentify]
		return !has, "annotation " + v
	})
	testwait.Eventually(t, 10*time.Second, "Blade status identify off", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		return err == nil && !b.Status.Identify, ""
	})
}

func testOverheatCriticalAndRecovery(t *testing.T) {
	needCluster(t)
	const name = "blade-3"
	ctx := t.Context()
	a := cluster.Agent(name)
	since := time.Now()
	// Busy and hot: at load 2 the equilibrium with the fan at 100 % is
	// above the critical-exit temperature, so it stays critical.
	if err := a.SetLoad(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.SetTemperature(ctx, 75); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.SetLoad(context.Background(), 0.2)
		_ = a.SetTemperature(context.Background(), 35)
	})
	testwait.Eventually(t, 30*time.Second, "fan at 100 % on the hardware", func(ctx context.Context) (bool, string) {
		st, err := a.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.FanPercent == 100, fmt.Sprintf("fan %d%% at %.1f °C", st.FanPercent, st.TemperatureCelsius)
	})
	testwait.Eventually(t, 10*time.Second, "condition BladeThermalCritical=True and the taint", func(ctx context.Context) (bool, string) {
		return critical(ctx, name, corev1.ConditionTrue, true)
	})
	ev := waitEvent(t, name, "CriticalTemperature", since)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("CriticalTemperature is a %s Event, want Warning", ev.Type)
	}
	testwait.Eventually(t, 10*time.Second, "Blade status critical", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return b.Status.Critical && b.Status.Fan.Mode == "critical" && b.Status.Fan.Percent == 100,
			fmt.Sprintf("critical=%v fan=%+v", b.Status.Critical, b.Status.Fan)
	})

	since = time.Now()
	if err := a.SetLoad(ctx, 0.2); err != nil {
		t.Fatal(err)
	}
	if err := a.SetTemperature(ctx, 40); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "condition BladeThermalCritical=False, taint removed", func(ctx context.Context) (bool, string) {
		return critical(ctx, name, corev1.ConditionFalse, false)
	})
	waitEvent(t, name, "TemperatureNormal", since)
	testwait.Eventually(t, 10*time.Second, "Blade status not critical", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		return err == nil && !b.Status.Critical && b.Status.Fan.Mode == "auto", ""
	})
}

// critical reports whether the Node's BladeThermalCritical condition has
// status want and its thermal-critical taint is present as tainted says.
func critical(ctx context.Context, name string, want corev1.ConditionStatus, tainted bool) (bool, string) {
	n, err := cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	var got corev1.ConditionStatus = "missing"
	for _, c := range n.Status.Conditions {
		if c.Type == kbv1.NodeConditionThermalCritical {
			got = c.Status
		}
	}
	has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == kbv1.TaintThermalCritical && t.Effect == corev1.TaintEffectNoSchedule
	})
	return got == want && has == tainted, fmt.Sprintf("condition %s, tainted %v", got, has)
}

func testBladeConfigAppliedLive(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	pids := agentPIDs(t)
	bc := &kbv1.BladeConfig{}
	if err := cluster.Ctrl.Get(ctx, client.ObjectKey{Name: bladeConfigName}, bc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(bc.DeepCopy())
	bc.Spec.Agent.CriticalCelsius = 70
	if err := cluster.Ctrl.Patch(ctx, bc, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.WaitRolledOut(ctx, bladeConfigName, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range cluster.Nodes {
		b, err := blade(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Config == nil || b.Status.Config.Generation != bc.Generation {
			t.Errorf("Blade %s config %+v, want %s generation %d", n, b.Status.Config, bladeConfigName, bc.Generation)
		}
	}
	// The running agent says so over its own gRPC socket too.
	out, err := bladectl("--blade", "blade-1", "status", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("generation %d", bc.Generation); !strings.Contains(out, want) {
		t.Errorf("bladectl status does not report %q:\n%s", want, out)
	}
	if got := agentPIDs(t); !maps2Equal(got, pids) {
		t.Errorf("agent processes changed from %v to %v: the config must apply without a restart", pids, got)
	}
}

// testAgentsConfinedToTheirNode: the agents act as the agent
// ServiceAccount of their Node (localcluster writes their kubeconfigs), so
// every flow above ran under the installed RBAC and admission policy. Here
// blade-1's identity may patch blade-1 but is refused on blade-2, its Blade
// and Events about it, with the policy's message.
func testAgentsConfinedToTheirNode(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Agent("blade-1").Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// An annotation under kubeblade.io/: the only metadata besides the fact
	// labels an agent may change on its own Node.
	label := []byte(`{"metadata":{"annotations":{"kubeblade.io/e2e-confined":"yes"}}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, "blade-1", types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatalf("blade-1's agent patching its own Node: %v", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("blade-1's agent %s: got %v, want Forbidden", what, err)
		} else if !strings.Contains(err.Error(), "blade-1") {
			t.Errorf("blade-1's agent %s: refusal does not name its own node: %v", what, err)
		}
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, "blade-2", types.MergePatchType, label, metav1.PatchOptions{})
	refused("patching Node blade-2", err)
	_, err = cs.CoreV1().Nodes().Patch(ctx, "blade-2", types.StrategicMergePatchType, []byte(`{"status":{"conditions":[{"type":"kubeblade.io/BladeThermalCritical","status":"True"}]}}`), metav1.PatchOptions{}, "status")
	refused("patching Node blade-2's status", err)
	_, err = cs.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "blade-2.e2e-forged"},
		EventTime:           metav1.NowMicro(),
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: "blade-2"},
		Reason:              "ButtonPressed",
		Action:              "PressButton",
		Type:                corev1.EventTypeNormal,
		ReportingController: kubeevents.ReportingController,
		ReportingInstance:   "blade-1",
	}, metav1.CreateOptions{})
	refused("writing an Event about blade-2", err)
	body, _ := json.Marshal(map[string]any{"status": map[string]any{"agentVersion": "forged"}})
	err = cs.CoreV1().RESTClient().Patch(types.MergePatchType).AbsPath("/apis/kubeblade.io/v1alpha1/blades/blade-2/status").Body(body).Do(ctx).Error()
	refused("patching Blade blade-2's status", err)
	if after, err := blade(ctx, "blade-2"); err == nil && after.Status.AgentVersion == "forged" {
		t.Error("Blade blade-2's status was changed by blade-1's agent")
	}
}

// testAdmissionPoliciesTypeCheck: kube-controller-manager type-checks every
// ValidatingAdmissionPolicy against the schemas of what it matches. A
// warning is an expression that can fail when it runs, which with
// failurePolicy Fail refuses the request.
func testAdmissionPoliciesTypeCheck(t *testing.T) {
	needCluster(t)
	testwait.Eventually(t, time.Minute, "every policy type-checked", func(ctx context.Context) (bool, string) {
		l, err := cluster.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		want := map[string]bool{"kubeblade-agent-own-node": true, "kubeblade-agent-own-blade": true, "kubeblade-agent-events": true, "kubeblade-agent-images": true,
			"kubeblade-operator-daemonsets": true, "kubeblade-operator-nodes": true}
		for _, p := range l.Items {
			if p.Status.TypeChecking == nil || p.Status.ObservedGeneration != p.Generation {
				return false, p.Name + " is not type-checked yet"
			}
			delete(want, p.Name)
		}
		if len(want) > 0 {
			return false, fmt.Sprintf("policies %v are not installed", want)
		}
		for _, p := range l.Items {
			for _, w := range p.Status.TypeChecking.ExpressionWarnings {
				t.Errorf("policy %s: %s: %s", p.Name, w.FieldRef, w.Warning)
			}
		}
		return true, ""
	})
}

func agentPIDs(t *testing.T) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, n := range cluster.Nodes {
		a := cluster.Agent(n)
		if !a.Running() {
			t.Fatalf("agent for %s is not running: %v (log %s)", n, a.Err(), a.Log)
		}
		m[n] = a.Pid()
	}
	return m
}

func maps2Equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testOperatorUpgrade replaces the running operator with a build stamped
// with another version while the agents run: the agents keep working with
// no operator, the new operator adopts the DaemonSet (same UID, no new
// rollout), the BladeConfig stays Ready throughout, and the new operator
// acts on the next change.
func testOperatorUpgrade(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	oldVersion, newVersion := binVersion(t, operatorProcBinary()), binVersion(t, operatorNext)
	if oldVersion == newVersion {
		t.Fatalf("the upgraded operator %s reports the same version %q", operatorNext, newVersion)
	}
	ds := &appsv1.DaemonSet{}
	if err := cluster.Ctrl.Get(ctx, client.ObjectKey{Namespace: localcluster.Namespace, Name: agentdaemonset.Name(bladeConfigName)}, ds); err != nil {
		t.Fatal(err)
	}
	pids := agentPIDs(t)
	lease, err := cluster.Client.CoordinationV1().Leases(localcluster.Namespace).Get(ctx, "kubeblade-operator.kubeblade.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldHolder := *lease.Spec.HolderIdentity

	// Watch the BladeConfig's Ready condition through the whole upgrade:
	// while its generation is the one before the test changes it below,
	// it must stay True.
	gen := bladeConfigGeneration(t)
	watchCtx, stopWatch := context.WithCancel(ctx)
	notReady := make(chan string, 100)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchReady(watchCtx, gen, notReady)
	}()

	if err := operatorProc.Stop(30 * time.Second); err != nil {
		t.Fatalf("old operator: %v", err)
	}
	// No operator: the agents keep serving the cluster.
	const name = "blade-3"
	annotate(ctx, t, name, kbv1.AnnotationIdentify, ptrTo("true"))
	testwait.Eventually(t, 10*time.Second, "identify while no operator runs", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		return err == nil && b.Status.Identify, ""
	})
	annotate(ctx, t, name, kbv1.AnnotationIdentify, ptrTo("false"))
	testwait.Eventually(t, 10*time.Second, "identify off while no operator runs", func(ctx context.Context) (bool, string) {
		b, err := blade(ctx, name)
		return err == nil && !b.Status.Identify, ""
	})

	next, err := cluster.StartOperator(localcluster.OperatorOptions{Binary: operatorNext, Name: "kubeblade-operator-next"})
	if err != nil {
		t.Fatal(err)
	}
	operatorProc = next
	testwait.Eventually(t, 60*time.Second, "the new operator holds the leader Lease", func(ctx context.Context) (bool, string) {
		l, err := cluster.Client.CoordinationV1().Leases(localcluster.Namespace).Get(ctx, "kubeblade-operator.kubeblade.io", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h := ""
		if l.Spec.HolderIdentity != nil {
			h = *l.Spec.HolderIdentity
		}
		return h != "" && h != oldHolder, "holder " + h
	})
	// Its controllers started: from here on it has seen the DaemonSet and
	// the BladeConfig it inherited.
	testwait.Eventually(t, 30*time.Second, "the new operator's controllers started", func(ctx context.Context) (bool, string) {
		if !next.Running() {
			t.Fatalf("new operator exited: %v", next.Err())
		}
		return strings.Contains(readFile(t, next.Log), "Starting workers"), ""
	})

	// The new operator acts: a config change is rolled out by it.
	bc := &kbv1.BladeConfig{}
	if err := cluster.Ctrl.Get(ctx, client.ObjectKey{Name: bladeConfigName}, bc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(bc.DeepCopy())
	bc.Spec.Agent.HysteresisCelsius = 4
	if err := cluster.Ctrl.Patch(ctx, bc, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.WaitRolledOut(ctx, bladeConfigName, time.Minute); err != nil {
		t.Fatal(err)
	}
	stopWatch()
	<-watchDone
	close(notReady)
	for s := range notReady {
		t.Errorf("BladeConfig left Ready during the upgrade: %s", s)
	}

	after := &appsv1.DaemonSet{}
	if err := cluster.Ctrl.Get(ctx, client.ObjectKey{Namespace: localcluster.Namespace, Name: ds.Name}, after); err != nil {
		t.Fatal(err)
	}
	if after.UID != ds.UID {
		t.Errorf("DaemonSet recreated: UID %s, was %s", after.UID, ds.UID)
	}
	if after.Generation != ds.Generation {
		t.Errorf("DaemonSet generation %d, was %d: the upgrade rolled the agents", after.Generation, ds.Generation)
	}
	if got := agentPIDs(t); !maps2Equal(got, pids) {
		t.Errorf("agent processes changed from %v to %v", pids, got)
	}
	log := readFile(t, next.Log)
	if !strings.Contains(log, newVersion) {
		t.Errorf("new operator's log does not name its version %q", newVersion)
	}
}

// watchReady reports every observation of the BladeConfig at generation
// gen whose Ready condition is not True, polling until ctx ends.
func watchReady(ctx context.Context, gen int64, bad chan<- string) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		bc := &kbv1.BladeConfig{}
		if err := cluster.Ctrl.Get(ctx, client.ObjectKey{Name: bladeConfigName}, bc); err == nil && bc.Generation == gen {
			if c := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigReady); c == nil || c.Status != metav1.ConditionTrue {
				select {
				case bad <- fmt.Sprintf("generation %d: %+v", bc.Generation, c):
				default:
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func bladeConfigGeneration(t *testing.T) int64 {
	t.Helper()
	bc := &kbv1.BladeConfig{}
	if err := cluster.Ctrl.Get(t.Context(), client.ObjectKey{Name: bladeConfigName}, bc); err != nil {
		t.Fatal(err)
	}
	return bc.Generation
}

func operatorProcBinary() string { return filepath.Join(binDir, "kubeblade-operator") }

// binVersion is the version a binary's --version prints (without the
// commit).
func binVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("%s --version printed nothing", bin)
	}
	return f[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
