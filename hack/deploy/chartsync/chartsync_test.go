package chartsync_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/hack/deploy/chartsync"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestChartInSync fails when config/ (CRDs, RBAC, admission policy) or
// values.yaml changed without `make chart-sync`.
func TestChartInSync(t *testing.T) {
	if err := chartsync.Check(root(t)); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeListsEveryValue walks values.yaml on its own (every leaf and
// every documented map) and looks for each key in the chart README.
func TestReadmeListsEveryValue(t *testing.T) {
	r := root(t)
	values, err := os.ReadFile(filepath.Join(r, render.ChartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(r, render.ChartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := chartsync.Values(values)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 40 {
		t.Fatalf("only %d values found", len(vs))
	}
	for _, v := range vs {
		if !strings.Contains(string(readme), "| `"+v.Key+"` |") {
			t.Errorf("README.md does not list %s", v.Key)
		}
	}
}

func TestUndocumentedValueRefused(t *testing.T) {
	_, err := chartsync.Values([]byte("image:\n  # -- documented\n  tag: x\n  pullPolicy: Always\n"))
	if err == nil || !strings.Contains(err.Error(), "image.pullPolicy") {
		t.Fatalf("err = %v, want one naming image.pullPolicy", err)
	}
}

func TestValues(t *testing.T) {
	got, err := chartsync.Values([]byte(`# file comment

# -- Name.
name: ""
op:
  # -- Resources,
  # whole.
  resources:
    limits: {memory: 1Mi}
  # -- Ports.
  ports: [1, 2]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []chartsync.Value{
		{Key: "name", Type: "string", Default: `""`, Description: "Name."},
		{Key: "op.resources", Type: "object", Default: `{"limits":{"memory":"1Mi"}}`, Description: "Resources, whole."},
		{Key: "op.ports", Type: "list", Default: `[1,2]`, Description: "Ports."},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}

func TestAddKeepAnnotation(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"with annotations": {
			"---\napiVersion: v1\nmetadata:\n  annotations:\n    a: b\n  name: x\n",
			"---\napiVersion: v1\nmetadata:\n  annotations:\n    helm.sh/resource-policy: keep\n    a: b\n  name: x\n",
		},
		"without annotations": {
			"apiVersion: v1\nmetadata:\n  name: x\n",
			"apiVersion: v1\nmetadata:\n  annotations:\n    helm.sh/resource-policy: keep\n  name: x\n",
		},
		"already kept": {
			"apiVersion: v1\nmetadata:\n  annotations:\n    helm.sh/resource-policy: keep\n",
			"apiVersion: v1\nmetadata:\n  annotations:\n    helm.sh/resource-policy: keep\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := chartsync.AddKeepAnnotation([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, string(got)); d != "" {
				t.Error(d)
			}
		})
	}
}
