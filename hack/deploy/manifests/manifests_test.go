package manifests_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/hack/deploy/manifests"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

// TestCommittedManifestsAreFresh is what fails CI when someone edits the
// chart without running `make manifests`.
func TestCommittedManifestsAreFresh(t *testing.T) {
	root, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := manifests.Check(context.Background(), root); err != nil {
		t.Fatal(err)
	}
}

func TestBundles(t *testing.T) {
	root, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := manifests.Files(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := render.Decode(files["crds/crds.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range crds {
		if u.GetKind() != "CustomResourceDefinition" {
			t.Errorf("CRD bundle holds a %s", render.Describe(u))
		}
	}
	if len(crds) != 2 {
		t.Errorf("CRD bundle holds %d CRDs, want 2", len(crds))
	}
	app, err := render.Decode(files["kubeblade.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	if app[0].GetKind() != "Namespace" || app[0].GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("first object is %s, want the privileged-labelled Namespace", render.Describe(app[0]))
	}
	for _, u := range app {
		if u.GetKind() == "CustomResourceDefinition" || u.GetKind() == "Job" {
			t.Errorf("app bundle holds %s", render.Describe(u))
		}
		for k := range u.GetAnnotations() {
			if strings.HasPrefix(k, "helm.sh/") {
				t.Errorf("%s keeps Helm annotation %s", render.Describe(u), k)
			}
		}
		if _, ok := u.GetLabels()["helm.sh/chart"]; ok {
			t.Errorf("%s keeps the helm.sh/chart label", render.Describe(u))
		}
	}
	if !strings.Contains(string(files["kustomization.yaml"]), "- crds\n") {
		t.Errorf("kustomization.yaml does not include the CRDs:\n%s", files["kustomization.yaml"])
	}
}
