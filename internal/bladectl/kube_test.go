package bladectl

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The Kubernetes-mode tests share one control plane, started by the first
// of them (so the gRPC tests do not wait for it), and stopped by TestMain.
var (
	kubeSuite = testenv.NewSuite(testenv.Options{CRDDirs: []string{"config/crd/bases"}}, startKubeSuite)
	// Set up by startKubeSuite.
	kubeAdmin      client.Client
	kubeKubeconfig string // contexts "admin" (current) and "viewer" (no RBAC)
)

func TestMain(m *testing.M) { os.Exit(kubeSuite.Run(m)) }

// kube is the Kubernetes-mode fixture of one test.
type kube struct {
	admin      client.Client
	kubeconfig string
	now        func() time.Time
}

func newKube(t *testing.T) *kube {
	t.Helper()
	kubeSuite.Need(t) // skips, or fails under make test, without a control plane
	return &kube{admin: kubeAdmin, kubeconfig: kubeKubeconfig, now: time.Now}
}

// startKubeSuite adds the users the tests act as and writes a kubeconfig
// for them; the directory goes when the suite's context ends.
func startKubeSuite(ctx context.Context, env *testenv.Env) error {
	admin, err := env.Environment().AddUser(envtest.User{Name: "blade-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	viewer, err := env.Environment().AddUser(envtest.User{Name: "viewer"}, nil)
	if err != nil {
		return err
	}
	if kubeAdmin, err = client.New(admin.Config(), client.Options{Scheme: kubeScheme}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bladectl-kube")
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { _ = os.RemoveAll(dir) })
	kubeKubeconfig = filepath.Join(dir, "kubeconfig")
	return testenv.WriteKubeconfig(kubeKubeconfig, "admin", map[string]*rest.Config{"admin": admin.Config(), "viewer": viewer.Config()})
}

// run runs bladectl as argv0 with KUBECONFIG pointing at the test cluster.
func (k *kube) run(ctx context.Context, argv0 string, args ...string) run {
	var out, errb bytes.Buffer
	code := Main(ctx, args, Env{Stdout: &out, Stderr: &errb, Argv0: argv0, Now: k.now,
		Getenv: func(v string) string {
			if v == "KUBECONFIG" {
				return k.kubeconfig
			}
			return ""
		}})
	return run{code, out.String(), errb.String()}
}

func (k *kube) bladectl(t *testing.T, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := k.run(ctx, "bladectl", args...)
	noLeaks(t, r)
	return r
}

func noLeaks(t *testing.T, r run) {
	t.Helper()
	for _, s := range []string{"goroutine ", "panic", "rpc error", "StatusError"} {
		if strings.Contains(r.stderr, s) {
			t.Errorf("raw error leaked: %s", r.stderr)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// node creates a Node, deleted when the test ends.
func (k *kube) node(t *testing.T, name string, annotations, labels map[string]string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels},
		Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
	}
	if err := k.admin.Create(testCtx(t), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.admin.Delete(context.Background(), n) })
	return n
}

func i32(v int32) *int32 { return &v }

// blade creates the Blade the agent would keep for node.
func (k *kube) blade(t *testing.T, node string, st v1alpha1.BladeStatus) *v1alpha1.Blade {
	t.Helper()
	b := &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k.admin.Create(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.admin.Delete(context.Background(), b) })
	st.NodeName = node
	b.Status = st
	if err := k.admin.Status().Update(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
	return b
}

func (k *kube) getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := k.admin.Get(testCtx(t), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// annotate plays the agent (or another user) changing an annotation.
func (k *kube) annotate(t *testing.T, node, key string, value *string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
	if value != nil {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, *value)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k.admin.Patch(testCtx(t), n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// waitAnnotation polls the Node until the annotation has the value.
func (k *kube) waitAnnotation(t *testing.T, node, key, value string) {
	t.Helper()
	testwait.Eventually(t, 20*time.Second, fmt.Sprintf("annotation %s on %s to become %q", key, node, value), func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := k.admin.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		return n.Annotations[key] == value, fmt.Sprintf("%q", n.Annotations[key])
	})
}

func healthy() v1alpha1.BladeStatus {
	return v1alpha1.BladeStatus{
		State: v1alpha1.BladeStateIdle, SoC: "bcm2712", FanUnit: "smart", PowerSource: "poe-802.3at",
		TemperatureCelsius: i32(48),
		Fan:                v1alpha1.BladeFanStatus{Percent: 40, RPM: i32(4100), Mode: "auto"},
		LEDs: v1alpha1.BladeLEDsStatus{Top: v1alpha1.LEDStatus{Pattern: "off"},
			Edge: v1alpha1.LEDStatus{Color: "#001000", Pattern: "steady"}},
		Capabilities:    []string{"fan", "leds", "tach"},
		HardwareBackend: "linux", AgentVersion: "v1.2.3-test",
		Config:        &v1alpha1.AppliedConfig{Name: "default", Generation: 3},
		HeartbeatTime: &metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
}

func TestKubeAnnotations(t *testing.T) {
	k := newKube(t)
	keep := map[string]string{"example.com/keep": "yes"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"example.com/keep": "yes"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := map[string]struct {
		args      []string
		start     map[string]string
		want      map[string]string
		result    string
		managedBy bool // bladectl's field manager owns the annotation afterwards
	}{
		"identify":        {[]string{"identify"}, keep, with(v1alpha1.AnnotationIdentify, "true"), "identify started", true},
		"identify-off":    {[]string{"identify", "--off"}, with(v1alpha1.AnnotationIdentify, "true"), with(v1alpha1.AnnotationIdentify, "false"), "identify stopped", true},
		"stealth-on":      {[]string{"stealth", "on"}, keep, with(v1alpha1.AnnotationStealth, "true"), "stealth on", true},
		"stealth-off":     {[]string{"stealth", "off"}, with(v1alpha1.AnnotationStealth, "true"), with(v1alpha1.AnnotationStealth, "false"), "stealth off", true},
		"stealth-clear":   {[]string{"stealth", "clear"}, with(v1alpha1.AnnotationStealth, "true", v1alpha1.AnnotationFanSpeed, "30"), with(v1alpha1.AnnotationFanSpeed, "30"), "stealth back to the configured mode", false},
		"fan-percent":     {[]string{"fan", "55"}, keep, with(v1alpha1.AnnotationFanSpeed, "55"), "fan at 55 %", true},
		"fan-percent-pct": {[]string{"fan", "100%"}, with(v1alpha1.AnnotationFanSpeed, "20"), with(v1alpha1.AnnotationFanSpeed, "100"), "fan at 100 %", true},
		"fan-auto":        {[]string{"fan", "auto"}, with(v1alpha1.AnnotationFanSpeed, "20"), with(v1alpha1.AnnotationFanSpeed, "auto"), "fan follows the curve", true},
		"fan-zero":        {[]string{"fan", "0"}, nil, map[string]string{v1alpha1.AnnotationFanSpeed: "0"}, "fan at 0 %", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node := "ann-" + name
			k.node(t, node, tc.start, map[string]string{"kubeblade.io/soc": "bcm2712"})
			k.blade(t, node, healthy())
			before := k.getNode(t, node)
			r := k.bladectl(t, append(tc.args, "--node", node)...)
			if r.code != ExitOK || r.stderr != "" || !strings.Contains(r.stdout, node+"   "+tc.result+"\n") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			after := k.getNode(t, node)
			if diff := cmp.Diff(tc.want, after.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			// Nothing but the annotations changed.
			strip := func(n *corev1.Node) *corev1.Node {
				n = n.DeepCopy()
				n.Annotations, n.ResourceVersion, n.ManagedFields = nil, "", nil
				return n
			}
			if diff := cmp.Diff(strip(before), strip(after)); diff != "" {
				t.Errorf("node changed beyond annotations (-before +after):\n%s", diff)
			}
			if tc.managedBy {
				key := "" // the annotation the command set
				for a, v := range tc.want {
					if before.Annotations[a] != v {
						key = a
					}
				}
				if !managedBy(after, FieldManager, key) {
					t.Errorf("%s is not managed by %q: %+v", key, FieldManager, after.ManagedFields)
				}
			}
		})
	}
}

func managedBy(n *corev1.Node, manager, annotation string) bool {
	for _, mf := range n.ManagedFields {
		if mf.Manager == manager && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:`+annotation+`"`) {
			return true
		}
	}
	return false
}

func TestKubeInvalidFanTouchesNothing(t *testing.T) {
	k := newKube(t)
	k.node(t, "badfan-1", map[string]string{v1alpha1.AnnotationFanSpeed: "30"}, nil)
	before := k.getNode(t, "badfan-1")
	for _, v := range []string{"101", "-5", "fast", "50.5", "auto100"} {
		t.Run(v, func(t *testing.T) {
			r := k.bladectl(t, "fan", "--node", "badfan-1", "--", v)
			if r.code != ExitUsage || !strings.Contains(r.stderr, fmt.Sprintf("error: fan %q: want auto or a percent from 0 to 100", v)) || r.stdout != "" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
		})
	}
	if after := k.getNode(t, "badfan-1"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("node written: %v", after.Annotations)
	}
}

func TestKubeIdentifyWait(t *testing.T) {
	k := newKube(t)
	t.Run("agent confirms", func(t *testing.T) {
		k.node(t, "wait-1", nil, nil)
		k.blade(t, "wait-1", healthy())
		done := make(chan run, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- k.run(ctx, "bladectl", "identify", "--wait", "--node", "wait-1")
		}()
		k.waitAnnotation(t, "wait-1", v1alpha1.AnnotationIdentify, "true")
		k.annotate(t, "wait-1", v1alpha1.AnnotationIdentify, nil) // the button was pressed
		r := <-done
		noLeaks(t, r)
		if r.code != ExitOK || r.stdout != "BLADE    RESULT\nwait-1   identify confirmed\n" || r.stderr != "" {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("stopped by someone else", func(t *testing.T) {
		k.node(t, "wait-2", nil, nil)
		k.blade(t, "wait-2", healthy())
		done := make(chan run, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- k.run(ctx, "bladectl", "identify", "--wait", "--node", "wait-2")
		}()
		k.waitAnnotation(t, "wait-2", v1alpha1.AnnotationIdentify, "true")
		k.annotate(t, "wait-2", v1alpha1.AnnotationIdentify, ptr("false"))
		r := <-done
		if r.code != ExitFailed || !strings.Contains(r.stderr, "wait-2: identify was stopped (kubeblade.io/identify=false) before the button confirmed it") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("times out", func(t *testing.T) {
		k.node(t, "wait-3", nil, nil)
		k.blade(t, "wait-3", healthy())
		// Nothing confirms, so only --timeout ends the wait, as the
		// message says; no wall-clock bound (it would measure the load).
		r := k.bladectl(t, "identify", "--wait", "--timeout", "1s", "--node", "wait-3")
		if r.code != ExitFailed || !strings.HasPrefix(r.stderr, "wait-3: identify not confirmed within 1s; kubeblade.io/identify=true stays set") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		if v := k.getNode(t, "wait-3").Annotations[v1alpha1.AnnotationIdentify]; v != "true" {
			t.Errorf("identify annotation = %q after the timeout", v)
		}
	})
}

var (
	uidRE     = regexp.MustCompile(`("uid": |uid: )"?[0-9a-f-]{36}"?`)
	rvRE      = regexp.MustCompile(`("resourceVersion": |resourceVersion: )"?'?[0-9]+'?"?`)
	createdRE = regexp.MustCompile(`("creationTimestamp": |creationTimestamp: )"?[0-9TZ:-]+"?`)
)

// kubeGolden compares got with testdata/name after replacing what the API
// server makes up (UIDs, resource versions, creation times); -update
// rewrites the file.
func kubeGolden(t *testing.T, name, got string) {
	t.Helper()
	got = uidRE.ReplaceAllString(got, `${1}"$$UID"`)
	got = rvRE.ReplaceAllString(got, `${1}"$$RV"`)
	got = createdRE.ReplaceAllString(got, `${1}"$$CREATED"`)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// goldenBlades makes two Blades (one hot, one in stealth) and a node
// without one, all labelled group=golden.
func goldenBlades(t *testing.T, k *kube) {
	t.Helper()
	group := map[string]string{"kubeblade.io/test-group": "golden"}
	k.node(t, "golden-1", nil, group)
	k.node(t, "golden-2", nil, group)
	k.node(t, "golden-3", nil, group)
	k.blade(t, "golden-1", healthy())
	hot := healthy()
	hot.State, hot.Critical, hot.TemperatureCelsius = v1alpha1.BladeStateCritical, true, i32(86)
	hot.Fan = v1alpha1.BladeFanStatus{Percent: 100, RPM: i32(8900), Mode: "critical"}
	hot.Config, hot.Identify, hot.PowerSource, hot.SoC = nil, true, "poe-or-usbc", "bcm2711"
	hot.Conditions = []metav1.Condition{{Type: v1alpha1.BladeConditionThermalCritical, Status: metav1.ConditionTrue,
		Reason: "AboveCritical", Message: "86 °C ≥ 80 °C", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))}}
	b := k.blade(t, "golden-2", hot)
	// AGE: three days after the newest Blade, whatever second it was made in.
	created := b.CreationTimestamp.Time
	k.now = func() time.Time { return created.Add(72*time.Hour + 30*time.Minute) }
}

func TestKubeGetBladesGolden(t *testing.T) {
	k := newKube(t)
	goldenBlades(t, k)
	for _, format := range []string{"table", "wide", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := k.bladectl(t, "get", "blades", "-l", "kubeblade.io/test-group=golden", "-o", format)
			if r.code != ExitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			kubeGolden(t, "get-blades."+format, r.stdout)
		})
	}
	t.Run("one named is the object", func(t *testing.T) {
		r := k.bladectl(t, "get", "blade", "golden-1", "-o", "json")
		if r.code != ExitOK || !strings.Contains(r.stdout, `"kind": "Blade"`) || strings.Contains(r.stdout, `"kind": "List"`) ||
			strings.Contains(r.stdout, "managedFields") {
			t.Fatalf("exit %d stdout %s stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("named, one missing", func(t *testing.T) {
		r := k.bladectl(t, "get", "blades", "golden-2", "golden-3", "--node", "golden-1", "--node", "golden-nope")
		wantErr := "golden-3: no Blade for node \"golden-3\": is the kubeblade agent running there?\n" +
			"golden-nope: node \"golden-nope\" not found\nerror: 2 of 4 blades failed\n"
		if r.code != ExitFailed || r.stderr != wantErr {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[1], "golden-2 ") || !strings.HasPrefix(lines[2], "golden-1 ") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
	})
	t.Run("nothing matches", func(t *testing.T) {
		r := k.bladectl(t, "get", "blades", "-l", "kubeblade.io/test-group=nobody")
		if r.code != ExitOK || r.stdout != "" || r.stderr != "No Blades found.\n" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("all", func(t *testing.T) {
		r := k.bladectl(t, "get", "blades")
		if r.code != ExitOK || !strings.Contains(r.stdout, "\ngolden-1 ") || !strings.Contains(r.stdout, "\ngolden-2 ") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("wide only for get", func(t *testing.T) {
		r := k.bladectl(t, "status", "--node", "golden-1", "-o", "wide")
		if r.code != ExitUsage {
			t.Fatalf("%+v", r)
		}
	})
}

func TestKubeStatusFromBlade(t *testing.T) {
	k := newKube(t)
	goldenBlades(t, k)
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			r := k.bladectl(t, "status", "--node", "golden-1", "--node", "golden-2", "-o", format)
			if r.code != ExitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			kubeGolden(t, "kube-status."+format, r.stdout)
		})
	}
	t.Run("version", func(t *testing.T) {
		r := k.bladectl(t, "version", "--node", "golden-1")
		if r.code != ExitOK || !strings.Contains(r.stdout, "golden-1   v1.2.3-test\n") {
			t.Fatalf("%+v", r)
		}
	})
}

func TestKubeMultiNodeOneMissing(t *testing.T) {
	k := newKube(t)
	k.node(t, "multi-ok", nil, nil)
	k.blade(t, "multi-ok", healthy())
	k.node(t, "multi-noblade", nil, nil)

	r := k.bladectl(t, "status", "--node", "multi-ok", "--node", "multi-missing", "--node", "multi-noblade")
	wantErr := "multi-missing: node \"multi-missing\" not found\n" +
		"multi-noblade: no Blade for node \"multi-noblade\": is the kubeblade agent running there?\n" +
		"error: 2 of 3 blades failed\n"
	if r.code != ExitFailed || r.stderr != wantErr {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "multi-ok   48.0°C   40% auto 4100rpm   poe-802.3at   ok") {
		t.Errorf("stdout:\n%s", r.stdout)
	}

	r = k.bladectl(t, "identify", "--node", "multi-ok", "--node", "multi-missing")
	if r.code != ExitFailed || r.stdout != "BLADE      RESULT\nmulti-ok   identify started\n" ||
		!strings.HasPrefix(r.stderr, "multi-missing: node \"multi-missing\" not found\n") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if v := k.getNode(t, "multi-ok").Annotations[v1alpha1.AnnotationIdentify]; v != "true" {
		t.Errorf("multi-ok identify = %q", v)
	}

	// The annotation is kept on a node without an agent, with a warning.
	r = k.bladectl(t, "stealth", "on", "--node", "multi-noblade")
	if r.code != ExitOK || r.stderr != "multi-noblade: warning: node has no Blade, so no kubeblade agent is acting on the annotation yet\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if v := k.getNode(t, "multi-noblade").Annotations[v1alpha1.AnnotationStealth]; v != "true" {
		t.Errorf("multi-noblade stealth = %q", v)
	}
}

func TestKubeSelectorAndAllNodes(t *testing.T) {
	k := newKube(t)
	for _, n := range []string{"sel-1", "sel-2"} {
		k.node(t, n, nil, map[string]string{"kubeblade.io/test-group": "sel"})
		k.blade(t, n, healthy())
	}
	k.node(t, "sel-other", nil, map[string]string{"kubeblade.io/test-group": "other"})
	r := k.bladectl(t, "fan", "70", "-l", "kubeblade.io/test-group=sel")
	if r.code != ExitOK || r.stdout != "BLADE   RESULT\nsel-1   fan at 70 %\nsel-2   fan at 70 %\n" {
		t.Fatalf("%+v", r)
	}
	for n, want := range map[string]string{"sel-1": "70", "sel-2": "70", "sel-other": ""} {
		if v := k.getNode(t, n).Annotations[v1alpha1.AnnotationFanSpeed]; v != want {
			t.Errorf("%s fan-speed = %q, want %q", n, v, want)
		}
	}
	r = k.bladectl(t, "status", "--all-nodes", "-o", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"blade": "sel-1"`) || !strings.Contains(r.stdout, `"blade": "sel-2"`) ||
		strings.Contains(r.stdout, "sel-other") {
		t.Fatalf("%+v", r)
	}
	r = k.bladectl(t, "identify", "-l", "kubeblade.io/test-group=nobody")
	if r.code != ExitFailed || r.stderr != "error: no node has the labels kubeblade.io/test-group=nobody\n" {
		t.Fatalf("%+v", r)
	}
}

func TestKubectlBladeDispatch(t *testing.T) {
	k := newKube(t)
	for _, n := range []string{"plugin-1", "plugin-2"} {
		k.node(t, n, nil, nil)
		k.blade(t, n, healthy())
	}
	plugin := func(args ...string) run {
		t.Helper()
		r := k.run(testCtx(t), "/usr/local/bin/kubectl-blade", args...)
		noLeaks(t, r)
		return r
	}
	if r := plugin("identify", "plugin-1"); r.code != ExitOK || r.stdout != "BLADE      RESULT\nplugin-1   identify started\n" {
		t.Fatalf("kubectl blade identify: %+v", r)
	}
	if r := plugin("stealth", "on", "plugin-1", "plugin-2"); r.code != ExitOK {
		t.Fatalf("kubectl blade stealth on: %+v", r)
	}
	if r := plugin("fan", "40", "--node", "plugin-2"); r.code != ExitOK {
		t.Fatalf("kubectl blade fan --node: %+v", r)
	}
	want := map[string]map[string]string{
		"plugin-1": {v1alpha1.AnnotationIdentify: "true", v1alpha1.AnnotationStealth: "true"},
		"plugin-2": {v1alpha1.AnnotationStealth: "true", v1alpha1.AnnotationFanSpeed: "40"},
	}
	for n, w := range want {
		if diff := cmp.Diff(w, k.getNode(t, n).Annotations); diff != "" {
			t.Errorf("%s annotations (-want +got):\n%s", n, diff)
		}
	}
	if r := plugin("status", "plugin-1"); r.code != ExitOK || !strings.HasPrefix(r.stdout, "BLADE      TEMP") || !strings.Contains(r.stdout, "\nplugin-1 ") {
		t.Fatalf("kubectl blade status: %+v", r)
	}
	if r := plugin("get", "blades", "plugin-2"); r.code != ExitOK || !strings.HasPrefix(r.stdout, "NODE       TEMP") || !strings.Contains(r.stdout, "\nplugin-2 ") {
		t.Fatalf("kubectl blade get blades: %+v", r)
	}
	if r := plugin("status"); r.code != ExitUsage || !strings.Contains(r.stderr, "error: which nodes? name them (kubectl blade COMMAND NODE...)") {
		t.Fatalf("kubectl blade status without nodes: %+v", r)
	}
	if r := plugin("version"); r.code != ExitOK || !strings.HasPrefix(r.stdout, "bladectl ") {
		t.Fatalf("kubectl blade version: %+v", r)
	}
	// bladectl itself stays in the gRPC mode: arguments are not nodes.
	if r := k.bladectl(t, "status", "plugin-1"); r.code != ExitUsage || !strings.Contains(r.stderr, "takes no arguments") {
		t.Fatalf("bladectl status NODE: %+v", r)
	}
	if r := k.bladectl(t, "status", "--node", "plugin-1", "-b", "local"); r.code != ExitUsage || !strings.Contains(r.stderr, "do not mix") {
		t.Fatalf("bladectl --node with --blade: %+v", r)
	}
}

func TestKubeMonitor(t *testing.T) {
	k := newKube(t)
	k.node(t, "mon-1", nil, nil)
	b := k.blade(t, "mon-1", healthy())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{wrote: make(chan struct{}, 1)}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"monitor", "--node", "mon-1"}, Env{Stdout: out, Stderr: &errb, Now: time.Now,
			Getenv: func(v string) string {
				if v == "KUBECONFIG" {
					return k.kubeconfig
				}
				return ""
			}})
	}()
	out.waitFor(t, "03:04:05  mon-1         status                48.0°C    40% auto 4100rpm")
	b.Status.TemperatureCelsius = i32(71)
	b.Status.Fan.Percent = 85
	b.Status.HeartbeatTime = &metav1.Time{Time: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)}
	if err := k.admin.Status().Update(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "03:05:00  mon-1         status                71.0°C    85% auto 4100rpm")
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("monitor exit %d, stderr %q", code, errb.String())
	}
}

func TestKubeErrors(t *testing.T) {
	k := newKube(t)
	k.node(t, "err-1", nil, nil)
	k.blade(t, "err-1", healthy())

	// An API server that is not there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	gone := filepath.Join(t.TempDir(), "gone")
	if err := testenv.WriteKubeconfig(gone, "gone", map[string]*rest.Config{"gone": {Host: "https://" + addr}}); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unreachable", []string{"status", "--node", "err-1", "--kubeconfig", gone}, ExitFailed,
			"err-1: cannot reach the Kubernetes API at https://" + addr + ": connection refused\n"},
		{"unreachable get", []string{"get", "blades", "--kubeconfig", gone}, ExitFailed,
			"error: cannot reach the Kubernetes API at https://" + addr + ": connection refused\n"},
		{"forbidden", []string{"identify", "--node", "err-1", "--context", "viewer"}, ExitFailed,
			`err-1: forbidden: User "viewer" cannot patch resource "nodes" in API group "" at the cluster scope (bladectl needs get, list, watch and patch on nodes and get, list, watch on blades.kubeblade.io)` + "\n"},
		{"forbidden get", []string{"get", "blades", "--context", "viewer"}, ExitFailed,
			`error: forbidden: User "viewer" cannot list resource "blades" in API group "kubeblade.io" at the cluster scope`},
		{"unknown context", []string{"status", "--node", "err-1", "--context", "nope"}, ExitFailed, `error: kubeconfig: context "nope" does not exist`},
		{"missing kubeconfig", []string{"status", "--node", "err-1", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, ExitFailed, "error: kubeconfig: "},
		{"both modes", []string{"status", "--node", "err-1", "--all"}, ExitUsage, "error: --blade/--all (gRPC) and --node/--all-nodes/--selector (Kubernetes) do not mix"},
		{"all-nodes and selector", []string{"status", "--all-nodes", "-l", "a=b"}, ExitUsage, "error: use either --all-nodes or --selector"},
		{"bad selector", []string{"status", "-l", "a=b=c"}, ExitUsage, `error: --selector "a=b=c": `},
		{"get with --blade", []string{"get", "blades", "-b", "x"}, ExitUsage, "error: get blades reads the Kubernetes API"},
		{"get unknown type", []string{"get", "pods"}, ExitUsage, `error: get "pods": bladectl can get blades`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := k.bladectl(t, tc.args...)
			if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.stderr) {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %q", r.code, r.stdout, r.stderr)
			}
		})
	}
	if n := k.getNode(t, "err-1"); len(n.Annotations) != 0 {
		t.Errorf("annotations written by a refused request: %v", n.Annotations)
	}

	// No kubeconfig anywhere.
	var out, errb bytes.Buffer
	code := Main(testCtx(t), []string{"status", "--node", "err-1"}, Env{Stdout: &out, Stderr: &errb})
	if code != ExitFailed || errb.String() != "error: no Kubernetes configuration: use --kubeconfig, set KUBECONFIG, or create ~/.kube/config\n" {
		t.Fatalf("without a kubeconfig: exit %d stderr %q", code, errb.String())
	}
}

// The Blade for a deleted node goes too; monitor says so instead of hanging.
func TestKubeMonitorBladeDeleted(t *testing.T) {
	k := newKube(t)
	k.node(t, "mondel-1", nil, nil)
	b := k.blade(t, "mondel-1", healthy())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{wrote: make(chan struct{}, 1)}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"monitor", "--node", "mondel-1"}, Env{Stdout: out, Stderr: &errb, Now: time.Now,
			Getenv: func(v string) string {
				if v == "KUBECONFIG" {
					return k.kubeconfig
				}
				return ""
			}})
	}()
	out.waitFor(t, "mondel-1      status")
	if err := k.admin.Delete(testCtx(t), b); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if code := <-done; code != ExitFailed || errb.String() != "mondel-1: the Blade for node \"mondel-1\" was deleted\n" {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
}
