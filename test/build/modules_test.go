// Package build tests properties of the build itself rather than of the
// code: what keeps a cold `make test` from compiling the same thing twice.
package build

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

// The Go modules make test builds from the same packages, and what it builds
// of each: the project's own, hack/deploy (chart, manifests, image),
// test/kubelet (the real-kubelet suite) with their tests, hack/tools/kube's
// Kubernetes binaries (kube-apiserver, kubelet...) and controller-gen. The Go
// build cache shares a compiled package between them only when every module
// it is built from has the same version in each, so a dependency at two
// versions is compiled twice on a cold run (the Kubernetes client and API
// types take minutes). etcd, containerd and the CNI plugins share little
// and keep their own pins.
var modules = []struct{ dir, pattern string }{
	{".", "./..."},
	{"hack/deploy", "./..."},
	{"test/kubelet", "./..."},
	{"hack/tools/kube", "tool"},
	{"hack/tools/controller-gen", "tool"},
}

// TestSharedDependenciesHaveOneVersion fails when a module whose packages
// two of those modules build has different versions in them; `go get
// module@version` in the one behind, then `go mod tidy`, fixes it.
func TestSharedDependenciesHaveOneVersion(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root := testenv.RepoRoot()
	// versions[module path][version] lists the project modules that build it.
	versions := map[string]map[string][]string{}
	for _, mod := range modules {
		m := mod.dir
		// A replaced module is built from its replacement: hack/tools/kube
		// replaces Kubernetes' staging modules by their published versions.
		cmd := exec.Command("go", "list", "-deps", "-test", "-f",
			"{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}", mod.pattern)
		cmd.Dir = filepath.Join(root, m)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v\n%s", m, err, stderr.String())
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, version, ok := strings.Cut(line, " ")
			// The project's own packages: the main module in its own
			// tree, a replaced dependency in the others.
			if !ok || seen[line] || path == "github.com/kubeblade/kubeblade" || strings.HasPrefix(path, "github.com/kubeblade/kubeblade/") {
				continue
			}
			seen[line] = true
			if versions[path] == nil {
				versions[path] = map[string][]string{}
			}
			versions[path][version] = append(versions[path][version], m)
		}
	}
	if len(versions) < 50 {
		t.Fatalf("only %d dependency modules found: go list did not list what the modules build", len(versions))
	}
	var paths []string
	for p := range versions {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if len(versions[p]) < 2 {
			continue
		}
		var vs []string
		for v, ms := range versions[p] {
			vs = append(vs, v+" in "+strings.Join(ms, ", "))
		}
		sort.Strings(vs)
		t.Errorf("%s is built at %d versions: %s", p, len(vs), strings.Join(vs, "; "))
	}
}
