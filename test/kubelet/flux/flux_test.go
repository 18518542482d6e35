package fluxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/nodeenv"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/podwait"
)

const (
	// site is the cluster directory of the cluster repository
	// (clusters/<site>/), as `flux bootstrap --path=clusters/<site>` lays
	// it out.
	site = "lab"
	// appNamespace is the non-default KUBEBLADE_NAMESPACE the suite sets.
	appNamespace = "blades-e2e"
	// Waits bound a broken run; a working one is done well before.
	reconcileWait = 5 * time.Minute
)

// Flux's kinds, by API version.
var (
	gitRepositoryKind = kind{"source.toolkit.fluxcd.io/v1", "GitRepository"}
	ociRepositoryKind = kind{"source.toolkit.fluxcd.io/v1", "OCIRepository"}
	kustomizationKind = kind{"kustomize.toolkit.fluxcd.io/v1", "Kustomization"}
	helmReleaseKind   = kind{"helm.toolkit.fluxcd.io/v2", "HelmRelease"}
	bladeConfigKind   = kind{"kubeblade.io/v1alpha1", "BladeConfig"}
	bladeKind         = kind{"kubeblade.io/v1alpha1", "Blade"}
)

type kind struct{ apiVersion, kind string }

// Step names, for the steps that later ones need.
const (
	stepCRDsFirst = "kubeblade-crds Ready before kubeblade starts (dependsOn)"
	stepSubst     = "postBuild.substituteFrom: namespace and image repository"
	stepRelease   = "HelmRelease Ready"
	stepPods      = "operator and agent pods Running on the real kubelet"
	stepHealth    = "kubeblade Kustomization Ready through its health checks"
	stepUpgrade   = "upgrade by changing the tag in git: CRDs, release, image; BladeConfigs and Blades intact"
)

// state the steps share.
var (
	fleet, kubebladeRepo *repo
	imageRepository      string
)

func TestFlux(t *testing.T) {
	step(t, stepCRDsFirst, nil, testCRDsFirst)
	step(t, stepSubst, []string{stepCRDsFirst}, testSubstitution)
	step(t, stepRelease, []string{stepCRDsFirst}, testHelmRelease)
	step(t, stepPods, []string{stepRelease}, testPods)
	step(t, stepHealth, []string{stepRelease}, testKustomizationHealthy)
	step(t, "flux get: the status a user reads", []string{stepHealth}, testFluxGet)
	step(t, stepUpgrade, []string{stepHealth}, testUpgrade)
	step(t, "bad value: invalid BladeConfig in values, the release keeps running", []string{stepUpgrade}, testInvalidBladeConfig)
	step(t, "bad value: an image tag that does not exist, the release keeps running", []string{stepUpgrade}, testBadImage)
	step(t, "sandbox taint and gvisor RuntimeClass: the agent runs, names no RuntimeClass", []string{stepPods}, testSandboxNode)
	step(t, "removal: the kubeblade Kustomization out of git uninstalls the app; namespace, CRDs, BladeConfigs, Blades kept", []string{stepHealth}, testRemoval)
}

// publish pushes release v<version> the way kubeblade's release does: the
// image and the chart to the registry, the CRD bundle to the kubeblade
// repository under the tag. describe changes the CRDs' text.
func publish(t *testing.T, version string, image bool, describe func(string) string) {
	t.Helper()
	if image {
		if err := env.registry.PushImage(ctx(t), os.Getenv(EnvImage), "kubeblade/kubeblade", "v"+version); err != nil {
			t.Fatalf("pushing the image v%s: %v", version, err)
		}
	}
	ch, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = version, "v"+version
	if err := env.registry.PushChart(ch, "kubeblade/charts/kubeblade"); err != nil {
		t.Fatalf("pushing the chart %s: %v", version, err)
	}
	crdDir := filepath.Join(kubebladeRepo.work, "deploy", "manifests", "crds")
	if err := os.MkdirAll(crdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"crds.yaml", "kustomization.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "manifests", "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if describe != nil {
			s = describe(s)
		}
		writeFile(t, filepath.Join(crdDir, f), s)
	}
	// The rest of the repository, which the GitRepository's ignore rules
	// leave out of its artifact.
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(kubebladeRepo.work, "README.md"), string(readme))
	if err := kubebladeRepo.commit("release v"+version, "v"+version); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// edit replaces old by new in a file of the cluster repository's working
// copy, failing when old is not there (the example changed).
func edit(t *testing.T, rel, old, new string) {
	t.Helper()
	p := filepath.Join(fleet.work, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q: deploy/flux changed; update the suite", rel, old)
	}
	writeFile(t, p, strings.Replace(string(b), old, new, 1))
}

// kubebladeDir is where the cluster repository holds deploy/flux.
var kubebladeDir = filepath.Join("clusters", site, "kubeblade")

// setUpClusterRepo writes the cluster repository as docs/install.md says:
// deploy/flux copied to clusters/<site>/kubeblade/, the kubeblade
// Kustomization's path set to its app/, kubeblade-vars.yaml adjusted; and
// the sources pointed at this machine's git server and registry in place of
// GitHub and ghcr.io. clusters/<site>/flux-system/ holds the sync objects
// `flux bootstrap` writes (its gotk-components.yaml, the controllers'
// Deployments, is left out: the controllers run as processes here).
func setUpClusterRepo(t *testing.T) {
	t.Helper()
	src := filepath.Join(repoRoot, "deploy", "flux")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		writeFile(t, filepath.Join(fleet.work, kubebladeDir, rel), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	edit(t, filepath.Join(kubebladeDir, "kubeblade.yaml"), "path: ./clusters/my-cluster/kubeblade/app", "path: ./"+filepath.Join(kubebladeDir, "app"))
	edit(t, filepath.Join(kubebladeDir, "sources.yaml"), "url: https://github.com/kubeblade/kubeblade", "url: "+kubebladeRepo.url)
	edit(t, filepath.Join(kubebladeDir, "app", "ocirepository.yaml"), "url: oci://ghcr.io/kubeblade/charts/kubeblade", "url: oci://"+env.registryHost+"/kubeblade/charts/kubeblade")
	edit(t, filepath.Join(kubebladeDir, "kubeblade-vars.yaml"), "KUBEBLADE_NAMESPACE: kubeblade-system", "KUBEBLADE_NAMESPACE: "+appNamespace)
	edit(t, filepath.Join(kubebladeDir, "kubeblade-vars.yaml"), "KUBEBLADE_IMAGE_REPOSITORY: ghcr.io/kubeblade/kubeblade", "KUBEBLADE_IMAGE_REPOSITORY: "+imageRepository)
	// The node is amd64, not a blade: the default BladeConfig selects it
	// by name and runs the agent on the simulated blade.
	edit(t, filepath.Join(kubebladeDir, "app", "helmrelease.yaml"), "      spec:\n        agent:\n", "      spec:\n"+
		"        nodeSelector:\n          matchLabels:\n            kubernetes.io/hostname: "+nodeenv.NodeName+"\n"+
		"        agent:\n          hardware:\n            backend: simulated\n")
	writeFile(t, filepath.Join(fleet.work, "clusters", site, "flux-system", "kustomization.yaml"),
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-sync.yaml\n")
	writeFile(t, filepath.Join(fleet.work, "clusters", site, "flux-system", "gotk-sync.yaml"), fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  ref:
    branch: main
  url: %s
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m
  path: ./clusters/%s
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`, fleet.url, site))
	if err := fleet.commit("kubeblade from deploy/flux", ""); err != nil {
		t.Fatal(err)
	}
}

func testCRDsFirst(t *testing.T) {
	var err error
	if kubebladeRepo, err = env.newRepo("kubeblade"); err != nil {
		t.Fatal(err)
	}
	if fleet, err = env.newRepo("fleet"); err != nil {
		t.Fatal(err)
	}
	imageRepository = env.registryHost + "/kubeblade/kubeblade"
	publish(t, "0.1.0", true, nil)
	setUpClusterRepo(t)
	// What `flux bootstrap` applies: the sync objects; from then on
	// everything comes from git.
	objs, err := decodeFile(filepath.Join(fleet.work, "clusters", site, "flux-system", "gotk-sync.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := apply(ctx(t), env.client, o); err != nil {
			t.Fatal(err)
		}
	}
	crds := waitReady(t, kustomizationKind, fluxNamespace, "kubeblade-crds")
	app := waitReady(t, kustomizationKind, fluxNamespace, "kubeblade")
	crdsReady := readyTime(t, crds)
	// kubeblade's first object is its namespace: created only once
	// kubeblade-crds was Ready.
	ns := &corev1.Namespace{}
	if err := env.client.Get(ctx(t), client.ObjectKey{Name: appNamespace}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.CreationTimestamp.Time.Before(crdsReady) {
		t.Errorf("namespace %s created at %s, before kubeblade-crds was Ready at %s", appNamespace, ns.CreationTimestamp, crdsReady)
	}
	for _, n := range []string{"bladeconfigs.kubeblade.io", "blades.kubeblade.io"} {
		crd := get(t, kind{"apiextensions.k8s.io/v1", "CustomResourceDefinition"}, "", n)
		if labels := crd.GetLabels(); labels["kustomize.toolkit.fluxcd.io/name"] != "kubeblade-crds" {
			t.Errorf("CRD %s labels %v: not applied by kubeblade-crds", n, labels)
		}
	}
	deps, _, _ := unstructured.NestedSlice(app.Object, "spec", "dependsOn")
	if len(deps) != 1 {
		t.Errorf("kubeblade dependsOn %v, want kubeblade-crds", deps)
	}
}

func testSubstitution(t *testing.T) {
	hr := get(t, helmReleaseKind, appNamespace, "kubeblade")
	repoValue, _, _ := unstructured.NestedString(hr.Object, "spec", "values", "image", "repository")
	if repoValue != imageRepository {
		t.Errorf("HelmRelease image.repository %q, want %q (KUBEBLADE_IMAGE_REPOSITORY)", repoValue, imageRepository)
	}
	critical, _, _ := unstructured.NestedFieldNoCopy(hr.Object, "spec", "values", "bladeConfig", "spec", "agent", "criticalCelsius")
	if fmt.Sprint(critical) != "60" {
		t.Errorf("criticalCelsius %v, want 60 (BLADE_CRITICAL_CELSIUS)", critical)
	}
	get(t, ociRepositoryKind, appNamespace, "kubeblade")
	for _, ns := range []string{"kubeblade-system", fluxNamespace} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(helmReleaseKind.apiVersion)
		l.SetKind(helmReleaseKind.kind + "List")
		if err := env.client.List(ctx(t), l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 0 {
			t.Errorf("%d HelmReleases in %s; all belong in %s", len(l.Items), ns, appNamespace)
		}
	}
}

func testHelmRelease(t *testing.T) {
	hr := waitReady(t, helmReleaseKind, appNamespace, "kubeblade")
	// The chart version, with the OCI artifact's digest as build metadata
	// when it comes from an OCIRepository.
	if v, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision"); !strings.HasPrefix(v, "0.1.0+") {
		t.Errorf("HelmRelease lastAttemptedRevision %q, want 0.1.0+<digest>", v)
	}
}

func testPods(t *testing.T) {
	operator := waitPod(t, "app.kubernetes.io/component=operator", "the operator pod")
	if img := operator.Spec.Containers[0].Image; img != imageRepository+":v0.1.0" {
		t.Errorf("operator image %q, want %s:v0.1.0 (pulled from the registry)", img, imageRepository)
	}
	agent := waitPod(t, "app.kubernetes.io/component=agent", "the agent pod")
	if agent.Spec.NodeName != nodeenv.NodeName {
		t.Errorf("agent on node %q, want %s", agent.Spec.NodeName, nodeenv.NodeName)
	}
	if id := agent.Status.ContainerStatuses[0].ImageID; !strings.HasPrefix(id, imageRepository+"@sha256:") {
		t.Errorf("agent imageID %q: not pulled from %s", id, imageRepository)
	}
}

func testKustomizationHealthy(t *testing.T) {
	k := waitReady(t, kustomizationKind, fluxNamespace, "kubeblade")
	if st, msg := condition(k, "Healthy"); st != "True" {
		t.Errorf("kubeblade Healthy %s (%s), want True: wait: true checks what it applied", st, msg)
	}
	entries, _, _ := unstructured.NestedSlice(k.Object, "status", "inventory", "entries")
	var ids []string
	for _, e := range entries {
		m, _ := e.(map[string]any)
		ids = append(ids, fmt.Sprint(m["id"]))
	}
	want := appNamespace + "_kubeblade_helm.toolkit.fluxcd.io_HelmRelease"
	if !strings.Contains(strings.Join(ids, " "), want) {
		t.Errorf("kubeblade inventory %v has no %s", ids, want)
	}
}

func testFluxGet(t *testing.T) {
	out := fluxGet(t)
	t.Logf("flux get:\n%s", out)
	for _, row := range []struct{ name, revision, ready, message string }{
		{"kustomization/kubeblade-crds", "v0.1.0@sha1:", "True", "Applied revision: v0.1.0@sha1:"},
		{"kustomization/kubeblade", "main@sha1:", "True", "Applied revision: main@sha1:"},
		{"helmrelease/kubeblade", "0.1.0", "True", "Helm install succeeded"},
	} {
		line := findRow(out, row.name)
		if line == nil {
			t.Errorf("no row %s", row.name)
			continue
		}
		if !strings.HasPrefix(line[1], row.revision) || line[3] != row.ready || !strings.HasPrefix(line[4], row.message) {
			t.Errorf("%s: revision %q ready %q message %q, want %s… %s %s…", row.name, line[1], line[3], line[4], row.revision, row.ready, row.message)
		}
	}
}

// fluxGet prints what `flux get kustomizations -A` and `flux get
// helmreleases -A` show, from the same fields (flux2 v2.9.2,
// cmd/flux/get_kustomization.go and get_helmrelease.go): name, the last
// applied revision, suspended, and the Ready condition's status and
// message.
func fluxGet(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tREVISION\tSUSPENDED\tREADY\tMESSAGE")
	for _, k := range []struct {
		kind
		revision []string
	}{
		{kustomizationKind, []string{"status", "lastAppliedRevision"}},
		{helmReleaseKind, []string{"status", "lastAttemptedRevision"}},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(k.apiVersion)
		l.SetKind(k.kind.kind + "List")
		if err := env.client.List(ctx(t), l); err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			rev, _, _ := unstructured.NestedString(o.Object, k.revision...)
			suspended, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
			st, rm := condition(&o, "Ready")
			_, msg, _ := strings.Cut(rm, ": ")
			fmt.Fprintf(w, "%s/%s\t%s\t%t\t%s\t%s\n", strings.ToLower(k.kind.kind), o.GetName(), rev, suspended, st, msg)
		}
	}
	w.Flush()
	return b.String()
}

func findRow(out, name string) []string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && f[0] == name {
			return []string{f[0], f[1], f[2], f[3], strings.Join(f[4:], " ")}
		}
	}
	return nil
}

// get reads one object.
func get(t *testing.T, k kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	o, err := getObj(ctx(t), k, ns, name)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", k.kind, ns, name, err)
	}
	return o
}

func getObj(c context.Context, k kind, ns, name string) (*unstructured.Unstructured, error) {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(k.apiVersion)
	o.SetKind(k.kind)
	return o, env.client.Get(c, client.ObjectKey{Namespace: ns, Name: name}, o)
}

// waitReady waits until a Flux object's Ready condition is True for its
// current generation (observedGeneration), as `flux get` reads it.
func waitReady(t *testing.T, k kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var o *unstructured.Unstructured
	eventually(t, reconcileWait, fmt.Sprintf("%s %s/%s Ready", k.kind, ns, name), func(c context.Context) (bool, string) {
		var err error
		o, err = getObj(c, k, ns, name)
		if err != nil {
			return false, err.Error()
		}
		st, rm := condition(o, "Ready")
		observed, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		return st == "True" && observed == o.GetGeneration(), fmt.Sprintf("Ready=%s %s (generation %d, observed %d)", st, rm, o.GetGeneration(), observed)
	})
	return o
}

// readyTime is when the Ready condition last changed.
func readyTime(t *testing.T, o *unstructured.Unstructured) time.Time {
	t.Helper()
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			ts, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
			if err != nil {
				t.Fatal(err)
			}
			return ts
		}
	}
	t.Fatalf("%s has no Ready condition", o.GetName())
	return time.Time{}
}

// eventually is testwait.Poll, ended early by an interrupt or a component
// that died.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, string)) {
	t.Helper()
	err := testwait.Poll(ctx(t), timeout, func(c context.Context) (bool, string) {
		if node.Exited() != nil {
			return true, ""
		}
		return cond(c)
	})
	if err := node.Exited(); err != nil {
		t.Fatalf("waiting for %s: a component died: %v", what, err)
	}
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; %v", timeout, what, err)
	}
}

// waitPod waits for the one live pod in appNamespace matching selector to
// be Ready.
func waitPod(t *testing.T, selector, what string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, reconcileWait, what, podwait.Ready(node.Client, appNamespace, selector, nil, &pod))
	return pod
}

// requestReconcile asks a Flux controller to reconcile an object now, as
// `flux reconcile` does (the reconcile.fluxcd.io/requestedAt annotation).
func requestReconcile(t *testing.T, k kind, ns, name string) {
	t.Helper()
	o := get(t, k, ns, name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, time.Now().Format(time.RFC3339Nano))
	if err := env.client.Patch(ctx(t), o, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// crdDescription is the description of BladeConfig's spec in the served
// CRD.
func crdDescription(c context.Context) (string, error) {
	crd, err := getObj(c, kind{"apiextensions.k8s.io/v1", "CustomResourceDefinition"}, "", "bladeconfigs.kubeblade.io")
	if err != nil {
		return "", err
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return "", fmt.Errorf("no versions")
	}
	v, _ := versions[0].(map[string]any)
	d, _, _ := unstructured.NestedString(v, "schema", "openAPIV3Schema", "properties", "spec", "description")
	return d, nil
}

// pushFleet commits the cluster repository, has Flux fetch it now and
// waits until the flux-system Kustomization applied it (kubeblade-vars
// included). Then, when the kubeblade Kustomization exists, it asks for its
// reconciliation too, as `flux reconcile kustomization kubeblade` does:
// both follow the same GitRepository, and kubeblade may have run on the new
// revision before flux-system applied the new variables; nothing else
// makes it substitute them again before its interval.
func pushFleet(t *testing.T, msg string) {
	t.Helper()
	if err := fleet.commit(msg, ""); err != nil {
		t.Fatal(err)
	}
	sha, err := fleet.head()
	if err != nil {
		t.Fatal(err)
	}
	requestReconcile(t, gitRepositoryKind, fluxNamespace, "flux-system")
	want := "main@sha1:" + sha
	eventually(t, reconcileWait, "flux-system to apply "+want, func(c context.Context) (bool, string) {
		k, err := getObj(c, kustomizationKind, fluxNamespace, "flux-system")
		if err != nil {
			return false, err.Error()
		}
		rev, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
		_, rm := condition(k, "Ready")
		return rev == want, "applied " + rev + "; " + rm
	})
	if _, err := getObj(ctx(t), kustomizationKind, fluxNamespace, "kubeblade"); err == nil {
		requestReconcile(t, kustomizationKind, fluxNamespace, "kubeblade")
	}
}

func testUpgrade(t *testing.T) {
	bc := get(t, kind{"kubeblade.io/v1alpha1", "BladeConfig"}, "", "default")
	var blade *unstructured.Unstructured
	eventually(t, reconcileWait, "the agent's Blade", func(c context.Context) (bool, string) {
		var err error
		blade, err = getObj(c, kind{"kubeblade.io/v1alpha1", "Blade"}, "", nodeenv.NodeName)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	const oldDesc, newDesc = "BladeConfigSpec is the desired configuration.", "BladeConfigSpec is the desired configuration of the blades it selects."
	publish(t, "0.2.0", true, func(s string) string { return strings.Replace(s, oldDesc, newDesc, 1) })
	edit(t, filepath.Join(kubebladeDir, "sources.yaml"), "tag: v0.1.0", "tag: v0.2.0")
	edit(t, filepath.Join(kubebladeDir, "kubeblade-vars.yaml"), `KUBEBLADE_VERSION: "0.1.0"`, `KUBEBLADE_VERSION: "0.2.0"`)
	pushFleet(t, "kubeblade v0.2.0")

	eventually(t, reconcileWait, "the CRD of v0.2.0", func(c context.Context) (bool, string) {
		d, err := crdDescription(c)
		if err != nil {
			return false, err.Error()
		}
		return d == newDesc, "spec description: " + d
	})
	eventually(t, reconcileWait, "HelmRelease upgraded to 0.2.0 and Ready", func(c context.Context) (bool, string) {
		hr, err := getObj(c, helmReleaseKind, appNamespace, "kubeblade")
		if err != nil {
			return false, err.Error()
		}
		rev, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision")
		st, rm := condition(hr, "Ready")
		return strings.HasPrefix(rev, "0.2.0+") && st == "True" && strings.Contains(rm, "upgrade succeeded"), fmt.Sprintf("revision %s Ready=%s %s", rev, st, rm)
	})
	operator := waitPodImage(t, "app.kubernetes.io/component=operator", imageRepository+":v0.2.0")
	t.Logf("operator %s runs %s", operator.Name, operator.Spec.Containers[0].Image)
	waitPodImage(t, "app.kubernetes.io/component=agent", imageRepository+":v0.2.0")
	waitReady(t, kustomizationKind, fluxNamespace, "kubeblade")
	if bc2 := get(t, kind{"kubeblade.io/v1alpha1", "BladeConfig"}, "", "default"); bc2.GetUID() != bc.GetUID() {
		t.Errorf("BladeConfig default replaced (uid %s → %s), want it kept", bc.GetUID(), bc2.GetUID())
	}
	if b2 := get(t, kind{"kubeblade.io/v1alpha1", "Blade"}, "", nodeenv.NodeName); b2.GetUID() != blade.GetUID() {
		t.Errorf("Blade replaced (uid %s → %s), want it kept", blade.GetUID(), b2.GetUID())
	}
}

// waitPodImage waits for the one live pod matching selector to run image,
// Ready.
func waitPodImage(t *testing.T, selector, image string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, reconcileWait, selector+" running "+image, podwait.Ready(node.Client, appNamespace, selector,
		func(p *corev1.Pod) (bool, string) {
			return p.Spec.Containers[0].Image == image, "image " + p.Spec.Containers[0].Image
		}, &pod))
	return pod
}

func testInvalidBladeConfig(t *testing.T) {
	before := waitPod(t, "app.kubernetes.io/component=operator", "the operator pod")
	edit(t, filepath.Join(kubebladeDir, "kubeblade-vars.yaml"), `BLADE_CRITICAL_CELSIUS: "60"`, `BLADE_CRITICAL_CELSIUS: "500"`)
	pushFleet(t, "criticalCelsius 500")
	// After the failed upgrade the chart's remediation rolls back: Ready
	// then carries the rollback (helm-controller v1.6.2,
	// internal/reconcile/release.go, summarize), Released the failure.
	eventually(t, reconcileWait, "the HelmRelease to say why it is not Ready", func(c context.Context) (bool, string) {
		hr, err := getObj(c, helmReleaseKind, appNamespace, "kubeblade")
		if err != nil {
			return false, err.Error()
		}
		crit, _, _ := unstructured.NestedFieldNoCopy(hr.Object, "spec", "values", "bladeConfig", "spec", "agent", "criticalCelsius")
		st, rm := condition(hr, "Ready")
		rst, rrm := condition(hr, "Released")
		return fmt.Sprint(crit) == "500" && st == "False" && rst == "False" && strings.Contains(rrm, "criticalCelsius"),
			fmt.Sprintf("values criticalCelsius %v; Ready=%s %s; Released=%s %s", crit, st, rm, rst, rrm)
	})
	hr := get(t, helmReleaseKind, appNamespace, "kubeblade")
	_, ready := condition(hr, "Ready")
	_, released := condition(hr, "Released")
	t.Logf("HelmRelease Ready: %s\nReleased: %s", ready, released)
	eventually(t, reconcileWait, "the kubeblade Kustomization to say it is not Ready", func(c context.Context) (bool, string) {
		k, err := getObj(c, kustomizationKind, fluxNamespace, "kubeblade")
		if err != nil {
			return false, err.Error()
		}
		st, rm := condition(k, "Ready")
		return st == "False" && strings.Contains(rm, "HelmRelease"), fmt.Sprintf("Ready=%s %s", st, rm)
	})
	// The release in the cluster is the last good one: the operator pod
	// was never replaced and the BladeConfig keeps its valid value.
	after := waitPod(t, "app.kubernetes.io/component=operator", "the operator pod")
	if after.UID != before.UID || podwait.Restarts(after) != podwait.Restarts(before) {
		t.Errorf("operator pod %s (restarts %d) after the bad value, want %s (restarts %d) still running", after.Name, podwait.Restarts(after), before.Name, podwait.Restarts(before))
	}
	bc := get(t, kind{"kubeblade.io/v1alpha1", "BladeConfig"}, "", "default")
	if crit, _, _ := unstructured.NestedFieldNoCopy(bc.Object, "spec", "agent", "criticalCelsius"); fmt.Sprint(crit) != "60" {
		t.Errorf("BladeConfig criticalCelsius %v, want 60 kept", crit)
	}
	// Fixing the value in git brings the release back to Ready.
	edit(t, filepath.Join(kubebladeDir, "kubeblade-vars.yaml"), `BLADE_CRITICAL_CELSIUS: "500"`, `BLADE_CRITICAL_CELSIUS: "60"`)
	pushFleet(t, "criticalCelsius 60")
	waitReady(t, helmReleaseKind, appNamespace, "kubeblade")
	waitReady(t, kustomizationKind, fluxNamespace, "kubeblade")
}

func testSandboxNode(t *testing.T) {
	// A cluster with sandboxed workloads: a gvisor RuntimeClass, and the
	// node tainted so that only pods that tolerate the taint land there.
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "gvisor"}, "handler": "runsc",
	}}
	if err := apply(ctx(t), env.client, rc); err != nil {
		t.Fatal(err)
	}
	n, err := node.Client.CoreV1().Nodes().Get(ctx(t), nodeenv.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	taint := corev1.Taint{Key: "sandbox.example.com/runtime", Value: "gvisor", Effect: corev1.TaintEffectNoSchedule}
	n.Spec.Taints = append(n.Spec.Taints, taint)
	if _, err := node.Client.CoreV1().Nodes().Update(ctx(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n, err := node.Client.CoreV1().Nodes().Get(context.Background(), nodeenv.NodeName, metav1.GetOptions{})
		if err != nil {
			return
		}
		var keep []corev1.Taint
		for _, tt := range n.Spec.Taints {
			if tt.Key != taint.Key {
				keep = append(keep, tt)
			}
		}
		n.Spec.Taints = keep
		_, _ = node.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	})
	// A new agent pod is scheduled onto the tainted node.
	old := waitPod(t, "app.kubernetes.io/component=agent", "the agent pod")
	if err := node.Client.CoreV1().Pods(appNamespace).Delete(ctx(t), old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	eventually(t, reconcileWait, "a new agent pod Running on the tainted node", func(c context.Context) (bool, string) {
		pods, err := node.Client.CoreV1().Pods(appNamespace).List(c, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
		if err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.UID != old.UID && p.DeletionTimestamp == nil {
				pod = p
				return p.Spec.NodeName == nodeenv.NodeName && podwait.IsReady(p), podwait.Describe(p)
			}
		}
		return false, "no new agent pod"
	})
	if pod.Spec.RuntimeClassName != nil {
		t.Errorf("agent pod names RuntimeClass %q; it must run on the node's default runtime", *pod.Spec.RuntimeClassName)
	}
	tolerated := false
	for _, tol := range pod.Spec.Tolerations {
		if tol.ToleratesTaint(logr.Discard(), &taint, false) {
			tolerated = true
		}
	}
	if !tolerated {
		t.Errorf("agent pod tolerations %+v do not tolerate %v", pod.Spec.Tolerations, taint)
	}
}

// testRemoval takes the kubeblade Kustomization out of git, as a user
// removes kubeblade, and checks what "pruned" means (docs/install.md's Flux
// section says the same): kustomize-controller deletes what the Kustomization
// applied but the namespace (annotated kustomize.toolkit.fluxcd.io/prune:
// disabled), so the HelmRelease and the OCIRepository; helm-controller
// uninstalls the release (the operator, its RBAC and the chart's default
// BladeConfig) and runs the chart's post-delete cleanup Job, which deletes
// the agent DaemonSets, releases the BladeConfigs' finalizers and takes
// kubeblade's labels off the Node. Kept: the namespace (empty of
// kubeblade's workloads), the CRDs through kubeblade-crds, a BladeConfig of
// the user's own and the Blades.
func testRemoval(t *testing.T) {
	user := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeblade.io/v1alpha1", "kind": "BladeConfig",
		"metadata": map[string]any{"name": "spare-rack"},
		"spec":     map[string]any{"nodeSelector": map[string]any{"matchLabels": map[string]any{"example.com/rack": "spare"}}},
	}}
	if err := apply(ctx(t), env.client, user); err != nil {
		t.Fatal(err)
	}
	// The operator holds it with its finalizer, as every BladeConfig.
	var userUID string
	eventually(t, reconcileWait, "the operator's finalizer on BladeConfig spare-rack", func(c context.Context) (bool, string) {
		u, err := getObj(c, bladeConfigKind, "", "spare-rack")
		if err != nil {
			return false, err.Error()
		}
		userUID = string(u.GetUID())
		return slices.Contains(u.GetFinalizers(), "kubeblade.io/cleanup"), fmt.Sprintf("finalizers %v", u.GetFinalizers())
	})
	blade := get(t, bladeKind, "", nodeenv.NodeName)
	ns, err := node.Client.CoreV1().Namespaces().Get(ctx(t), appNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	p := filepath.Join(fleet.work, kubebladeDir, "kubeblade.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 || !strings.Contains(docs[1], "name: kubeblade\n") {
		t.Fatalf("kubeblade.yaml is not kubeblade-crds then kubeblade: deploy/flux changed; update the suite")
	}
	writeFile(t, p, docs[0]+"\n")
	start := time.Now()
	pushFleet(t, "remove kubeblade")

	gone := func(k kind, ns, name string) func(context.Context) (bool, string) {
		return func(c context.Context) (bool, string) {
			_, err := getObj(c, k, ns, name)
			return apierrors.IsNotFound(err), fmt.Sprintf("%s %s/%s: %v", k.kind, ns, name, err)
		}
	}
	eventually(t, reconcileWait, "the kubeblade Kustomization to be gone", gone(kustomizationKind, fluxNamespace, "kubeblade"))
	eventually(t, reconcileWait, "the HelmRelease to be gone (uninstalled)", gone(helmReleaseKind, appNamespace, "kubeblade"))
	eventually(t, reconcileWait, "the OCIRepository to be gone", gone(ociRepositoryKind, appNamespace, "kubeblade"))
	eventually(t, reconcileWait, "the chart's BladeConfig default to be gone", gone(bladeConfigKind, "", "default"))
	eventually(t, reconcileWait, "no kubeblade workload, release record or label left", func(c context.Context) (bool, string) {
		var left []string
		dss, err := node.Client.AppsV1().DaemonSets(appNamespace).List(c, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range dss.Items {
			left = append(left, "DaemonSet "+d.Name)
		}
		deps, err := node.Client.AppsV1().Deployments(appNamespace).List(c, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range deps.Items {
			left = append(left, "Deployment "+d.Name)
		}
		pods, err := node.Client.CoreV1().Pods(appNamespace).List(c, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Labels["app.kubernetes.io/component"] != "cleanup" {
				left = append(left, "Pod "+p.Name)
			}
		}
		secrets, err := node.Client.CoreV1().Secrets(appNamespace).List(c, metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range secrets.Items {
			left = append(left, "Helm release record "+s.Name)
		}
		n, err := node.Client.CoreV1().Nodes().Get(c, nodeenv.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for k := range n.Labels {
			if strings.HasPrefix(k, "kubeblade.io/") {
				left = append(left, "Node label "+k)
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
	t.Logf("kubeblade removed %s after the commit left git", time.Since(start).Round(time.Second))

	ns2, err := node.Client.CoreV1().Namespaces().Get(ctx(t), appNamespace, metav1.GetOptions{})
	if err != nil || ns2.UID != ns.UID || ns2.DeletionTimestamp != nil {
		t.Errorf("namespace %s after removal: %v (deleting: %v), want it kept", appNamespace, err, ns2.DeletionTimestamp)
	}
	for _, n := range []string{"bladeconfigs.kubeblade.io", "blades.kubeblade.io"} {
		if crd := get(t, kind{"apiextensions.k8s.io/v1", "CustomResourceDefinition"}, "", n); crd.GetDeletionTimestamp() != nil {
			t.Errorf("CRD %s is being deleted, want it kept", n)
		}
	}
	u := get(t, bladeConfigKind, "", "spare-rack")
	if string(u.GetUID()) != userUID || u.GetDeletionTimestamp() != nil || len(u.GetFinalizers()) != 0 {
		t.Errorf("BladeConfig spare-rack: deleting %v, finalizers %v; want it kept, released by the cleanup Job", u.GetDeletionTimestamp(), u.GetFinalizers())
	}
	if b2 := get(t, bladeKind, "", nodeenv.NodeName); b2.GetUID() != blade.GetUID() || b2.GetDeletionTimestamp() != nil {
		t.Errorf("Blade %s replaced or being deleted, want it kept", nodeenv.NodeName)
	}
	waitReady(t, kustomizationKind, fluxNamespace, "kubeblade-crds")
}

// upgradeTimedOut tells whether a HelmRelease's Released condition (as
// condition returns it, "reason: message") says the upgrade failed because
// its wait for the new pods ran out of time. Helm words that two ways,
// depending on where the deadline falls: its status waiter names the objects
// it waited for ("timeout waiting for: [Deployment/…/kubeblade-operator
// status: 'InProgress']"), and a deadline that falls while client-go's rate
// limiter holds a request back ends it with "client rate limiter Wait returned
// an error: rate: Wait(n=1) would exceed context deadline" (seen in a CI run
// of this suite at 63765ea).
func upgradeTimedOut(released string) bool {
	if !strings.HasPrefix(released, "UpgradeFailed: ") {
		return false
	}
	return strings.Contains(released, "timeout waiting for: [Deployment/"+appNamespace+"/kubeblade-operator") ||
		strings.Contains(released, "would exceed context deadline")
}

// testBadImage sets an image tag the registry does not have in the
// HelmRelease's values, and a short timeout beside it, as a user overrides
// both in their copy of app/helmrelease.yaml. Each upgrade waits that
// long for the operator's new pod, fails, and is rolled back (the example's
// upgrade remediation: rollback, 3 retries); then the HelmRelease stalls.
func testBadImage(t *testing.T) {
	const badTag = "v0.0.0-not-in-the-registry"
	operator := waitPod(t, "app.kubernetes.io/component=operator", "the operator pod")
	agent := waitPod(t, "app.kubernetes.io/component=agent", "the agent pod")
	hrFile := filepath.Join(kubebladeDir, "app", "helmrelease.yaml")
	edit(t, hrFile, "  timeout: 5m\n", "  timeout: 30s\n")
	edit(t, hrFile, "      repository: ${KUBEBLADE_IMAGE_REPOSITORY}\n", "      repository: ${KUBEBLADE_IMAGE_REPOSITORY}\n      tag: "+badTag+"\n")
	pushFleet(t, "image tag "+badTag)

	// What kubectl shows while an upgrade waits: the new operator pod
	// cannot pull the tag.
	var pullError string
	eventually(t, reconcileWait, "the HelmRelease to stall with the upgrade's failure", func(c context.Context) (bool, string) {
		if pullError == "" {
			pods, err := node.Client.CoreV1().Pods(appNamespace).List(c, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
			if err != nil {
				return false, err.Error()
			}
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					if w := cs.State.Waiting; w != nil && strings.HasSuffix(p.Spec.Containers[0].Image, ":"+badTag) && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
						pullError = fmt.Sprintf("pod %s: %s: %s", p.Name, w.Reason, w.Message)
					}
				}
			}
		}
		hr, err := getObj(c, helmReleaseKind, appNamespace, "kubeblade")
		if err != nil {
			return false, err.Error()
		}
		tag, _, _ := unstructured.NestedString(hr.Object, "spec", "values", "image", "tag")
		st, rm := condition(hr, "Ready")
		sst, srm := condition(hr, "Stalled")
		_, rrm := condition(hr, "Released")
		return tag == badTag && st == "False" && sst == "True" && upgradeTimedOut(rrm),
			fmt.Sprintf("values image.tag %q; Ready=%s %s; Stalled=%s %s; Released: %s", tag, st, rm, sst, srm, rrm)
	})
	if pullError == "" {
		t.Errorf("no operator pod was seen failing to pull %s", badTag)
	}
	hr := get(t, helmReleaseKind, appNamespace, "kubeblade")
	_, ready := condition(hr, "Ready")
	_, released := condition(hr, "Released")
	_, remediated := condition(hr, "Remediated")
	t.Logf("kubelet: %s\nHelmRelease Ready: %s\nReleased: %s\nRemediated: %s", pullError, ready, released, remediated)
	eventually(t, reconcileWait, "the kubeblade Kustomization to say it is not Ready", func(c context.Context) (bool, string) {
		k, err := getObj(c, kustomizationKind, fluxNamespace, "kubeblade")
		if err != nil {
			return false, err.Error()
		}
		st, rm := condition(k, "Ready")
		return st == "False" && strings.Contains(rm, "HelmRelease"), fmt.Sprintf("Ready=%s %s", st, rm)
	})
	// The rollbacks left the last good release running: the operator and
	// agent pods are the ones from before, and run the good image.
	for _, c := range []struct {
		selector string
		before   *corev1.Pod
	}{{"app.kubernetes.io/component=operator", operator}, {"app.kubernetes.io/component=agent", agent}} {
		after := waitPod(t, c.selector, c.selector)
		if after.UID != c.before.UID || podwait.Restarts(after) != podwait.Restarts(c.before) || after.Spec.Containers[0].Image != c.before.Spec.Containers[0].Image {
			t.Errorf("%s: pod %s (%s, restarts %d) after the bad tag, want %s (%s, restarts %d) still running",
				c.selector, after.Name, after.Spec.Containers[0].Image, podwait.Restarts(after), c.before.Name, c.before.Spec.Containers[0].Image, podwait.Restarts(c.before))
		}
	}
	// Fixing git brings the release back to Ready.
	edit(t, hrFile, "      tag: "+badTag+"\n", "")
	edit(t, hrFile, "  timeout: 30s\n", "  timeout: 5m\n")
	pushFleet(t, "image tag from the chart again")
	waitReady(t, helmReleaseKind, appNamespace, "kubeblade")
	waitReady(t, kustomizationKind, fluxNamespace, "kubeblade")
}
