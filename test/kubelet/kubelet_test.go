package kubelettest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/nodeenv"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/podwait"
)

func clientScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kbv1.AddToScheme(s)
	return s
}

// Step names, for the steps that later ones need.
const (
	stepInstall  = "helm install: operator Ready"
	stepDS       = "BladeConfig produces the agent DaemonSet"
	stepAgent    = "agent Ready through its probes"
	stepBlade    = "Blade written with the pod's projected token"
	stepUpgrade  = "helm upgrade rolls out"
	stepUninstal = "helm uninstall cleans the Node, keeps the CRDs"
)

func TestRealKubelet(t *testing.T) {
	step(t, stepInstall, nil, testInstall)
	step(t, stepDS, []string{stepInstall}, testDaemonSet)
	step(t, stepAgent, []string{stepDS}, testAgentReady)
	step(t, stepBlade, []string{stepAgent}, testBladeAndToken)
	// Before the steps that change the Blade: it measures a quiet agent.
	step(t, "API cost: one agent beside the kubelet (audit log)", []string{stepBlade}, testAPICost)
	step(t, "identify annotation: Event and Blade status", []string{stepBlade}, testIdentify)
	step(t, "BladeConfig change applied live, no restart", []string{stepBlade}, testLiveConfig)
	step(t, "kill -9: the kubelet restarts the agent, the Blade resumes", []string{stepBlade}, testKill)
	step(t, "stuck loop: liveness probe restarts the agent", []string{stepBlade}, testStuckLoop)
	step(t, stepUpgrade, []string{stepInstall}, testUpgrade)
	step(t, stepUninstal, []string{stepInstall}, testUninstall)
	step(t, "docs/install.md: Helm install, CRD upgrade, uninstall as written", nil, testDocsHelm)
	step(t, "docs/install.md: plain manifests install and removal as written", nil, testDocsManifests)
	step(t, "docs/install.md: install from your own registry as written (make release, make publish, helm)", nil, testDocsSelfHost)
}

func testInstall(t *testing.T) {
	// As docs/install.md says: the namespace exists, labelled, before the
	// release.
	_, err := node.Client.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: namespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	helmInstall(t)
	pod := waitPod(t, "app.kubernetes.io/component=operator", "the operator pod to be Ready", nil)
	c := pod.Spec.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("operator probes: liveness %+v readiness %+v, want /healthz and /readyz", c.LivenessProbe, c.ReadinessProbe)
	}
}

func testDaemonSet(t *testing.T) {
	var ds *appsv1.DaemonSet
	eventually(t, podWait, "the agent DaemonSet", func(ctx context.Context) (bool, string) {
		var err error
		ds, err = node.Client.AppsV1().DaemonSets(namespace).Get(ctx, agentDSName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	c := ds.Spec.Template.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name {
			t.Errorf("agent probe %s: %+v", name, p)
		}
	}
	if len(ds.OwnerReferences) != 1 || ds.OwnerReferences[0].Kind != "BladeConfig" || ds.OwnerReferences[0].Name != configName {
		t.Errorf("DaemonSet owners %+v, want BladeConfig %s", ds.OwnerReferences, configName)
	}
}

func testAgentReady(t *testing.T) {
	pod := waitPod(t, agentSelector, "the agent pod to be Ready", nil)
	if pod.Spec.NodeName != nodeenv.NodeName {
		t.Errorf("agent on node %q, want %q", pod.Spec.NodeName, nodeenv.NodeName)
	}
	// Ready is the kubelet's verdict from the readiness probe: the agent
	// answered /readyz with every check passing.
	if podwait.Restarts(pod) != 0 {
		t.Errorf("agent restarted %d times on its way to Ready: %s", podwait.Restarts(pod), podwait.Describe(pod))
	}
}

func testBladeAndToken(t *testing.T) {
	var blade *kbv1.Blade
	eventually(t, podWait, "the Blade with a status", func(ctx context.Context) (bool, string) {
		var err error
		blade, err = getBlade(ctx, t)
		if err != nil {
			return false, err.Error()
		}
		return blade.Status.HardwareBackend == "simulated" && blade.Status.Config != nil,
			fmt.Sprintf("status %+v", blade.Status)
	})
	if len(blade.OwnerReferences) != 1 || blade.OwnerReferences[0].Kind != "Node" {
		t.Errorf("Blade owners %+v, want its Node", blade.OwnerReferences)
	}
	n, err := node.Client.CoreV1().Nodes().Get(ctx(t), nodeenv.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[kbv1.LabelSoC] != "simulated" || n.Labels[kbv1.LabelBlade] != "true" || n.Labels[kbv1.LabelConfig] != configName {
		t.Errorf("Node labels %v, want the agent's facts and the operator's config label", n.Labels)
	}

	// The token the kubelet projected into the agent's pod: bound to the
	// pod and its Node, which is what the admission policy checks.
	pod := waitPod(t, agentSelector, "the agent pod", nil)
	token := projectedToken(t, pod)
	cfg := rest.AnonymousClientConfig(node.Config)
	cfg.BearerToken = token
	agentClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := agentClient.AuthenticationV1().SelfSubjectReviews().Create(ctx(t), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "system:serviceaccount:"+namespace+":kubeblade-agent" {
		t.Errorf("the projected token is %q", ui.Username)
	}
	if got := ui.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != nodeenv.NodeName {
		t.Errorf("the projected token's node-name claim is %v, want %s", got, nodeenv.NodeName)
	}
	// The same token may not write another node's Blade: the admission
	// policy, not the agent's good manners, keeps it to its own.
	agentKB, err := client.New(cfg, client.Options{Scheme: clientScheme()})
	if err != nil {
		t.Fatal(err)
	}
	other := &kbv1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "some-other-node"}}
	err = agentKB.Create(ctx(t), other)
	if err == nil {
		_ = kclient(t).Delete(context.Background(), other)
		t.Fatal("the agent's token created another node's Blade")
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		t.Errorf("creating another node's Blade with the agent's token: %v, want a refusal by the admission policy", err)
	}
}

// projectedToken reads the ServiceAccount token the kubelet wrote into the
// pod's projected volume.
func projectedToken(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(kubeletPodDir(pod), "volumes", "kubernetes.io~projected", "*", "token"))
	if len(matches) == 0 {
		t.Fatalf("no projected token under %s", kubeletPodDir(pod))
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func annotateNode(t *testing.T, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
	}
	if _, err := node.Client.CoreV1().Nodes().Patch(ctx(t), nodeenv.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitNodeEvent waits for an events.k8s.io Event about the Node with
// reason, newer than since.
func waitNodeEvent(t *testing.T, reason string, since time.Time) {
	t.Helper()
	eventually(t, time.Minute, "Event "+reason+" on the Node", func(ctx context.Context) (bool, string) {
		evs, err := node.Client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Kind != "Node" || e.Regarding.Name != nodeenv.NodeName {
				continue
			}
			at := e.EventTime.Time
			if e.Series != nil {
				at = e.Series.LastObservedTime.Time
			}
			if e.Reason == reason && !at.Before(since.Truncate(time.Second)) {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, fmt.Sprintf("events seen: %v", seen)
	})
}

func testIdentify(t *testing.T) {
	since := time.Now()
	annotateNode(t, kbv1.AnnotationIdentify, "true")
	waitNodeEvent(t, "IdentifyStarted", since)
	eventually(t, time.Minute, "Blade status identify=true", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, t)
		if err != nil {
			return false, err.Error()
		}
		return b.Status.Identify, fmt.Sprintf("identify %v", b.Status.Identify)
	})
	since = time.Now()
	annotateNode(t, kbv1.AnnotationIdentify, "false")
	waitNodeEvent(t, "IdentifyStopped", since)
	eventually(t, time.Minute, "Blade status identify=false", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, t)
		if err != nil {
			return false, err.Error()
		}
		return !b.Status.Identify, fmt.Sprintf("identify %v", b.Status.Identify)
	})
	annotateNode(t, kbv1.AnnotationIdentify, "")
}

func testLiveConfig(t *testing.T) {
	before := waitPod(t, agentSelector, "the agent pod", nil)
	ds, err := node.Client.AppsV1().DaemonSets(namespace).Get(ctx(t), agentDSName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := kclient(t)
	bc := &kbv1.BladeConfig{}
	if err := kc.Get(ctx(t), client.ObjectKey{Name: configName}, bc); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"agent":{"criticalCelsius":72}}}`))
	if err := kc.Patch(ctx(t), bc, patch); err != nil {
		t.Fatal(err)
	}
	// Put the value back afterwards: the release's value again, so the
	// next helm upgrade (server-side apply) shares the field with this
	// test's field manager instead of conflicting with it.
	t.Cleanup(func() {
		restore := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"agent":{"criticalCelsius":60}}}`))
		if err := kc.Patch(context.Background(), bc, restore); err != nil {
			t.Errorf("restoring criticalCelsius: %v", err)
		}
	})
	want := bc.Generation
	eventually(t, time.Minute, fmt.Sprintf("the Blade to report BladeConfig generation %d applied", want), func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, t)
		if err != nil {
			return false, err.Error()
		}
		if c := b.Status.Config; c != nil {
			return c.Name == configName && c.Generation == want, fmt.Sprintf("applied %s/%d", c.Name, c.Generation)
		}
		return false, "no applied config"
	})
	after := waitPod(t, agentSelector, "the agent pod", nil)
	if after.UID != before.UID || podwait.Restarts(after) != podwait.Restarts(before) {
		t.Errorf("the agent pod changed: %s (%d restarts) → %s (%d restarts)", before.UID, podwait.Restarts(before), after.UID, podwait.Restarts(after))
	}
	ds2, err := node.Client.AppsV1().DaemonSets(namespace).Get(ctx(t), agentDSName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds2.Generation != ds.Generation {
		t.Errorf("the DaemonSet went from generation %d to %d: a live setting rolled the pods", ds.Generation, ds2.Generation)
	}
}

// agentPID finds the agent container's main process through containerd.
func agentPID(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	if len(pod.Status.ContainerStatuses) == 0 {
		t.Fatal("no container status")
	}
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := node.Ctr(ctx(t), "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			var pid int
			if _, err := fmt.Sscan(f[1], &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no running task %s in:\n%s", id, out)
	return 0
}

// waitRestarted waits for the agent pod to count one more restart and be
// Ready again, and for the Blade to show the new process at work.
func waitRestarted(t *testing.T, before *corev1.Pod, since time.Time) {
	t.Helper()
	waitPod(t, agentSelector, "the agent to restart and be Ready", func(p *corev1.Pod) (bool, string) {
		if p.UID != before.UID {
			return false, "a new pod replaced the old one; the kubelet should restart the container in place"
		}
		return podwait.Restarts(p) > podwait.Restarts(before), podwait.Describe(p)
	})
	waitNodeEvent(t, "AgentStarted", since)
	eventually(t, time.Minute, "the Blade's heartbeat after the restart", func(ctx context.Context) (bool, string) {
		b, err := getBlade(ctx, t)
		if err != nil {
			return false, err.Error()
		}
		if h := b.Status.HeartbeatTime; h != nil {
			return !h.Time.Before(since.Truncate(time.Second)), "heartbeat " + h.String()
		}
		return false, "no heartbeat"
	})
}

func testKill(t *testing.T) {
	pod := waitPod(t, agentSelector, "the agent pod", nil)
	pid := agentPID(t, pod)
	since := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	waitRestarted(t, pod, since)
}

func testStuckLoop(t *testing.T) {
	pod := waitPod(t, agentSelector, "the agent pod", nil)
	since := time.Now()
	// The simulated thermal sensor's bus wedges: the agent's loop blocks in
	// its next read, stops ticking, and /healthz turns 503.
	simulator(t, "/sensor-hang?hung=true")
	waitRestarted(t, pod, since)
	evs, err := node.Client.CoreV1().Events(namespace).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == "Unhealthy" && strings.Contains(e.Message, "Liveness probe failed") {
			return
		}
	}
	t.Errorf("no Liveness probe failure among the pod's Events: the restart had another cause")
}

func testUpgrade(t *testing.T) {
	before := waitPod(t, "app.kubernetes.io/component=operator", "the operator pod", nil)
	helmUpgrade(t, "operator.logLevel=info")
	waitPod(t, "app.kubernetes.io/component=operator", "the upgraded operator pod to be Ready", func(p *corev1.Pod) (bool, string) {
		if p.UID == before.UID {
			return false, "still the old pod"
		}
		for _, a := range p.Spec.Containers[0].Args {
			if a == "--log-level=info" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("args %v", p.Spec.Containers[0].Args)
	})
}

func testUninstall(t *testing.T) {
	helmUninstall(t)
	assertUninstalled(t)
}

// assertUninstalled checks what an uninstall must leave: no kubeblade
// label on the Node, no agent DaemonSet, the CRDs still there.
func assertUninstalled(t *testing.T) {
	t.Helper()
	eventually(t, podWait, "kubeblade's labels to leave the Node", func(ctx context.Context) (bool, string) {
		n, err := node.Client.CoreV1().Nodes().Get(ctx, nodeenv.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for k := range n.Labels {
			if strings.HasPrefix(k, "kubeblade.io/") {
				left = append(left, k)
			}
		}
		return len(left) == 0, fmt.Sprintf("labels left: %v", left)
	})
	if _, err := node.Client.AppsV1().DaemonSets(namespace).Get(ctx(t), agentDSName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("agent DaemonSet after uninstall: %v, want NotFound", err)
	}
	for _, crd := range []string{"bladeconfigs.kubeblade.io", "blades.kubeblade.io"} {
		if _, err := apiextensions(t).Get(ctx(t), crd, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s after uninstall: %v, want it kept", crd, err)
		}
	}
}
