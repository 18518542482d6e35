package kubeclient_test

import (
	"os"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/kubeclient"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: []string{"config/crd/bases"}}, func(e *testenv.Env) { cfg = e.Config }))
}

func newClients(t *testing.T) *kubeclient.Clientset {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 50, 100
	cs, err := kubeclient.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Every kind the agent uses goes through a real API server: the REST paths,
// the scheme and the codecs must all be right for each group.
func TestClientsAgainstAnAPIServer(t *testing.T) {
	testenv.Need(t)
	ctx := t.Context()
	cs := newClients(t)
	apply := metav1.PatchOptions{FieldManager: "kubeclient-test", Force: ptr.To(true)}

	// Nodes: create, watch by name, server-side apply, status patch.
	if _, err := cs.Nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kc-node"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cs.Nodes.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kc-node"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	body := []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"kc-node","labels":{"kubeblade.io/blade":"true"}}}`)
	if _, err := cs.Nodes.Patch(ctx, "kc-node", types.ApplyPatchType, body, apply); err != nil {
		t.Fatal(err)
	}
	cond := []byte(`{"status":{"conditions":[{"type":"kubeblade.io/BladeThermalCritical","status":"False","reason":"TemperatureNormal"}]}}`)
	if _, err := cs.Nodes.Patch(ctx, "kc-node", types.StrategicMergePatchType, cond, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	n, err := cs.Nodes.Get(ctx, "kc-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["kubeblade.io/blade"] != "true" || len(n.Status.Conditions) != 1 {
		t.Errorf("node after patches: labels %v, conditions %v", n.Labels, n.Status.Conditions)
	}
	waitFor(t, w, func(e watch.Event) bool {
		got, ok := e.Object.(*corev1.Node)
		return ok && got.Labels["kubeblade.io/blade"] == "true"
	})

	// Blades: server-side apply of the object and of its status.
	blade := []byte(`{"apiVersion":"kubeblade.io/v1alpha1","kind":"Blade","metadata":{"name":"kc-node"}}`)
	if _, err := cs.Blades.Patch(ctx, "kc-node", types.ApplyPatchType, blade, apply); err != nil {
		t.Fatal(err)
	}
	status := []byte(`{"apiVersion":"kubeblade.io/v1alpha1","kind":"Blade","metadata":{"name":"kc-node"},"status":{"nodeName":"kc-node","agentVersion":"test"}}`)
	if _, err := cs.Blades.Patch(ctx, "kc-node", types.ApplyPatchType, status, apply, "status"); err != nil {
		t.Fatal(err)
	}
	b, err := cs.Blades.Get(ctx, "kc-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.AgentVersion != "test" {
		t.Errorf("Blade status = %+v", b.Status)
	}

	// BladeConfigs: list by name (what the agent's watch does).
	bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "kc-config"}, Spec: kbv1.BladeConfigSpec{
		Agent: agentconfigv1.AgentConfig{CriticalCelsius: 70},
	}}
	if _, err := cs.BladeConfigs.Create(ctx, bc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := cs.BladeConfigs.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kc-config"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Spec.Agent.CriticalCelsius != 70 {
		t.Errorf("BladeConfigs = %+v", l.Items)
	}

	// Events: create, then a series patch.
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "kc-node.1", Namespace: "default"},
		EventTime:  metav1.NewMicroTime(time.Now()), Reason: "ButtonPressed", Action: "PressButton", Type: "Normal",
		ReportingController: "kubeblade.io/agent", ReportingInstance: "kc-node",
		Regarding: corev1.ObjectReference{Kind: "Node", Name: "kc-node", UID: n.UID},
	}
	if _, err := cs.Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	series := []byte(`{"series":{"count":2,"lastObservedTime":"` + time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") + `"}}`)
	got, err := cs.Events("default").Patch(ctx, "kc-node.1", types.StrategicMergePatchType, series, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Series == nil || got.Series.Count != 2 {
		t.Errorf("series = %+v", got.Series)
	}

	// CertificateSigningRequests: a malformed request is refused with a
	// typed Invalid error (the codecs decode Status errors).
	_, err = cs.CSRs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "kc-csr"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Request: []byte("not a CSR"), SignerName: "kubeblade.io/agent-serving", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("malformed CSR: got %v, want Invalid", err)
	}
	if _, err := cs.CSRs.Get(ctx, "kc-csr", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a refused CSR: got %v, want NotFound", err)
	}
}

func waitFor(t *testing.T, w watch.Interface, ok func(watch.Event) bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, open := <-w.ResultChan():
			if !open {
				t.Fatal("watch closed")
			}
			if ok(e) {
				return
			}
		case <-timeout:
			t.Fatal("no matching watch event")
		}
	}
}

func TestNewRefusesBurstlessRateLimit(t *testing.T) {
	testenv.Need(t)
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5, 0
	if _, err := kubeclient.New(c); err == nil {
		t.Error("QPS without burst accepted")
	}
}

func TestSchemeHasOnlyTheAgentsKinds(t *testing.T) {
	s := kubeclient.Scheme()
	for _, gvk := range []struct{ group, version, kind string }{
		{"", "v1", "Node"}, {"events.k8s.io", "v1", "Event"}, {"certificates.k8s.io", "v1", "CertificateSigningRequest"},
		{"kubeblade.io", "v1alpha1", "Blade"}, {"kubeblade.io", "v1alpha1", "BladeConfig"},
	} {
		if !s.Recognizes(schemaGVK(gvk.group, gvk.version, gvk.kind)) {
			t.Errorf("scheme lacks %s/%s %s", gvk.group, gvk.version, gvk.kind)
		}
	}
	if s.Recognizes(schemaGVK("apps", "v1", "DaemonSet")) {
		t.Error("scheme holds apps/v1: it should register only the agent's kinds")
	}
}

func schemaGVK(g, v, k string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: g, Version: v, Kind: k}
}
