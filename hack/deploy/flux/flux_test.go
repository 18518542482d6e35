package flux_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

const dir = "deploy/flux"

// example is deploy/flux decoded into Flux's types.
type example struct {
	vars          *corev1.ConfigMap
	kustomization map[string]*kustomizev1.Kustomization
	git           map[string]*sourcev1.GitRepository
	oci           map[string]*sourcev1.OCIRepository
	helmRelease   *helmv2.HelmRelease
	namespaces    []*corev1.Namespace
	// raw file contents by path relative to deploy/flux
	files map[string]string
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:?=[^}]*)?\}`)

func load(t *testing.T) (string, *example) {
	t.Helper()
	root, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ex := &example{
		kustomization: map[string]*kustomizev1.Kustomization{},
		git:           map[string]*sourcev1.GitRepository{},
		oci:           map[string]*sourcev1.OCIRepository{},
		files:         map[string]string{},
	}
	err = filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root, dir), p)
		ex.files[rel] = string(b)
		for _, doc := range strings.Split(string(b), "\n---\n") {
			decodeStrict(t, rel, doc, ex)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, ex
}

// decodeStrict decodes one document into the Go type of its kind,
// refusing unknown fields, as the Flux controllers' API would.
func decodeStrict(t *testing.T, file, doc string, ex *example) {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	strict := func(into any) {
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Errorf("%s: %s does not decode strictly: %v", file, meta.Kind, err)
		}
	}
	switch meta.APIVersion + " " + meta.Kind {
	case kustomizev1.GroupVersion.String() + " " + kustomizev1.KustomizationKind:
		k := &kustomizev1.Kustomization{}
		strict(k)
		ex.kustomization[k.Name] = k
	case sourcev1.GroupVersion.String() + " " + sourcev1.GitRepositoryKind:
		g := &sourcev1.GitRepository{}
		strict(g)
		ex.git[g.Name] = g
	case sourcev1.GroupVersion.String() + " " + sourcev1.OCIRepositoryKind:
		o := &sourcev1.OCIRepository{}
		strict(o)
		ex.oci[o.Name] = o
	case helmv2.GroupVersion.String() + " " + helmv2.HelmReleaseKind:
		h := &helmv2.HelmRelease{}
		strict(h)
		ex.helmRelease = h
	case "v1 ConfigMap":
		c := &corev1.ConfigMap{}
		strict(c)
		ex.vars = c
	case "v1 Namespace":
		n := &corev1.Namespace{}
		strict(n)
		ex.namespaces = append(ex.namespaces, n)
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		var k struct {
			APIVersion string   `json:"apiVersion"`
			Kind       string   `json:"kind"`
			Resources  []string `json:"resources"`
		}
		strict(&k)
	default:
		t.Errorf("%s: unexpected %s %s", file, meta.APIVersion, meta.Kind)
	}
}

func TestFluxExample(t *testing.T) {
	root, ex := load(t)
	crds, app := ex.kustomization["kubeblade-crds"], ex.kustomization["kubeblade"]
	if crds == nil || app == nil {
		t.Fatalf("want Kustomizations kubeblade-crds and kubeblade, got %v", keys(ex.kustomization))
	}

	// CRDs: their own Kustomization, from the repository's CRD bundle, never pruned.
	if _, err := os.Stat(filepath.Join(root, crds.Spec.Path, "kustomization.yaml")); err != nil {
		t.Errorf("kubeblade-crds path %s: %v", crds.Spec.Path, err)
	}
	if crds.Spec.Prune {
		t.Error("kubeblade-crds prunes: deleting it would delete every BladeConfig")
	}
	if src := ex.git[crds.Spec.SourceRef.Name]; crds.Spec.SourceRef.Kind != sourcev1.GitRepositoryKind || src == nil {
		t.Errorf("kubeblade-crds source %v is not the example's GitRepository", crds.Spec.SourceRef)
	}

	// The app depends on the CRDs and health-checks its HelmRelease.
	if !slices.ContainsFunc(app.Spec.DependsOn, func(d kustomizev1.DependencyReference) bool { return d.Name == crds.Name }) {
		t.Errorf("kubeblade does not dependsOn %s: %v", crds.Name, app.Spec.DependsOn)
	}
	hr := ex.helmRelease
	if hr == nil {
		t.Fatal("no HelmRelease")
	}
	checked := app.Spec.Wait || slices.ContainsFunc(app.Spec.HealthChecks, func(r meta.NamespacedObjectKindReference) bool {
		return r.Kind == helmv2.HelmReleaseKind && r.Name == hr.Name
	})
	if !checked {
		t.Error("the kubeblade Kustomization does not health-check the HelmRelease")
	}

	// ${VAR}: only through postBuild.substituteFrom, only in files it substitutes.
	if app.Spec.PostBuild == nil || len(app.Spec.PostBuild.SubstituteFrom) == 0 {
		t.Fatal("kubeblade has no postBuild.substituteFrom")
	}
	for name, k := range ex.kustomization {
		if k.Spec.PostBuild != nil && len(k.Spec.PostBuild.Substitute) > 0 {
			t.Errorf("Kustomization %s uses an inline postBuild.substitute", name)
		}
	}
	if ex.vars == nil || app.Spec.PostBuild.SubstituteFrom[0].Name != ex.vars.Name {
		t.Fatalf("substituteFrom %v does not name the example's ConfigMap", app.Spec.PostBuild.SubstituteFrom)
	}
	used := sets.New[string]()
	for file, text := range ex.files {
		for _, m := range varRef.FindAllStringSubmatch(text, -1) {
			if !strings.HasPrefix(file, "app/") {
				t.Errorf("%s uses %s outside app/, where nothing substitutes it", file, m[0])
			}
			used.Insert(m[1])
			if _, ok := ex.vars.Data[m[1]]; !ok && m[2] == "" {
				t.Errorf("%s uses ${%s}, which %s does not define", file, m[1], ex.vars.Name)
			}
		}
	}
	for k := range ex.vars.Data {
		if !used.Has(k) {
			t.Errorf("%s defines %s, which nothing uses", ex.vars.Name, k)
		}
	}
	// The HelmRelease's namespace is a variable, but nothing substitutes
	// the Kustomization that health-checks it (it is outside app/): a
	// health check naming a namespace misses a release the variable moved,
	// and the Kustomization never becomes Ready. wait: true checks whatever
	// it applied, wherever it went.
	if strings.Contains(hr.Namespace, "${") {
		for _, h := range app.Spec.HealthChecks {
			t.Errorf("health check %s/%s names a fixed namespace, but the HelmRelease's is %s: use wait: true", h.Namespace, h.Name, hr.Namespace)
		}
	}

	// The HelmRelease: chart from the OCIRepository, CRDs left to kubeblade-crds, remediation.
	if hr.Spec.ChartRef == nil || hr.Spec.ChartRef.Kind != sourcev1.OCIRepositoryKind || ex.oci[hr.Spec.ChartRef.Name] == nil {
		t.Errorf("chartRef %v is not the example's OCIRepository", hr.Spec.ChartRef)
	}
	if hr.Spec.Install == nil || hr.Spec.Install.Remediation == nil || hr.Spec.Install.Remediation.Retries < 1 {
		t.Error("no install remediation")
	}
	if hr.Spec.Upgrade == nil || hr.Spec.Upgrade.Remediation == nil || hr.Spec.Upgrade.Remediation.Retries < 1 {
		t.Error("no upgrade remediation")
	}
	if hr.Spec.Install.CRDs != helmv2.Skip || hr.Spec.Upgrade.CRDs != helmv2.Skip {
		t.Errorf("CRD policies install=%q upgrade=%q, want Skip (kubeblade-crds owns them)", hr.Spec.Install.CRDs, hr.Spec.Upgrade.CRDs)
	}
	if hr.Spec.Upgrade.DisableWait || hr.Spec.Install.DisableWait {
		t.Error("the release must wait for its workloads to be health-checked")
	}
	if len(ex.namespaces) != 1 || ex.namespaces[0].Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("app/ must create the namespace labelled for the privileged Pod Security level")
	}
	// Removal: helm-controller's uninstall must reach the chart's
	// post-delete cleanup Job, which waits for nothing and runs in the
	// namespace (test/kubelet/flux's removal step shows it).
	if hr.Spec.Uninstall == nil || !hr.Spec.Uninstall.DisableWait {
		t.Error("uninstall.disableWait must be true: the chart's BladeConfig keeps its finalizer until the post-delete Job, which Helm runs after the wait")
	}
	if len(ex.namespaces) == 1 && ex.namespaces[0].Annotations["kustomize.toolkit.fluxcd.io/prune"] != "disabled" {
		t.Error("the namespace must not be pruned: the post-delete cleanup Job cannot start in a terminating namespace")
	}
}

// TestHelmReleaseValuesMeetTheChart substitutes the example's variables
// the way kustomize-controller does and renders the chart with the
// HelmRelease's values, so its schema checks them.
func TestHelmReleaseValuesMeetTheChart(t *testing.T) {
	root, ex := load(t)
	text := varRef.ReplaceAllStringFunc(ex.files["app/helmrelease.yaml"], func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		if v, ok := ex.vars.Data[sub[1]]; ok {
			return v
		}
		return strings.TrimPrefix(strings.TrimPrefix(sub[2], ":"), "=")
	})
	hr := &helmv2.HelmRelease{}
	if err := yaml.UnmarshalStrict([]byte(text), hr); err != nil {
		t.Fatal(err)
	}
	values := hr.GetValues()
	ch, err := render.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(context.Background(), ch, render.Options{Namespace: hr.Namespace, Values: values})
	if err != nil {
		t.Fatalf("the HelmRelease's values do not render: %v", err)
	}
	var crit any
	for _, u := range res.Objects {
		if u.GetKind() == "BladeConfig" {
			crit = u.Object["spec"].(map[string]any)["agent"].(map[string]any)["criticalCelsius"]
		}
	}
	if crit != int64(60) && crit != float64(60) {
		t.Errorf("BladeConfig criticalCelsius = %v (%T), want the number 60", crit, crit)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
