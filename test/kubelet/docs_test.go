package kubelettest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	typedapiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The documented commands this suite runs are the fenced ```sh blocks of
// docs/install.md that follow a `<!-- e2e: NAME -->` marker: run as
// written, with the real kubectl and helm CLIs, against the node.
const installDoc = "docs/install.md"

// docBlock returns the shell block of docs/install.md marked NAME.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, installDoc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	marker := "<!-- e2e: " + name + " -->"
	state := 0 // 0: before the marker, 1: before the block, 2: in it
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(line) == marker:
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			if strings.TrimSpace(line) != "```sh" {
				t.Fatalf("%s: the block after %s is %q, want ```sh", installDoc, marker, line)
			}
			state = 2
		case state == 1 && strings.TrimSpace(line) != "":
			t.Fatalf("%s: text between %s and its block: %q", installDoc, marker, line)
		case state == 2 && strings.HasPrefix(line, "```"):
			return b.String()
		case state == 2:
			b.WriteString(line + "\n")
		}
	}
	t.Fatalf("%s has no ```sh block marked %s", installDoc, marker)
	return ""
}

// runDoc runs a documented block with bash -e in dir, as a user would:
// kubectl and helm on PATH, KUBECONFIG pointing at the node, and HOME and
// Helm's directories in a temporary directory so nothing lands in the real
// home directory.
func runDoc(t *testing.T, name, dir string) string {
	t.Helper()
	return runDocEnv(t, name, dir, nil)
}

// runDocEnv is runDoc with env added to the environment, and without the
// variables through which an outer make (make e2e-kubelet) would pass its
// flags and command-line variables to a make the block runs.
func runDocEnv(t *testing.T, name, dir string, env []string) string {
	t.Helper()
	script := docBlock(t, name)
	home := t.TempDir()
	cmd := exec.CommandContext(ctx(t), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	var base []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
		default:
			base = append(base, kv)
		}
	}
	cmd.Env = append(append(base, env...),
		"PATH="+node.Assets.K8sDir+":"+filepath.Dir(helmBin)+":"+os.Getenv("PATH"),
		"KUBECONFIG="+node.Kubeconfig, "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "kube-cache"),
		"HELM_CACHE_HOME="+filepath.Join(home, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(home, "helm-data"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s (%s):\n$ %s%s", name, time.Since(start).Round(100*time.Millisecond), strings.ReplaceAll(strings.TrimSpace(script), "\n", "\n$ "), "\n"+string(out))
	if err != nil {
		t.Fatalf("the documented commands %q of %s failed: %v", name, installDoc, err)
	}
	return string(out)
}

func apiextensions(t *testing.T) typedapiext.CustomResourceDefinitionInterface {
	t.Helper()
	c, err := apiextclient.NewForConfig(node.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c.ApiextensionsV1().CustomResourceDefinitions()
}

// waitNamespaceGone deletes the release namespace, if any, and waits until
// it is gone, so that a documented install starts as on a new cluster.
func waitNamespaceGone(t *testing.T) {
	t.Helper()
	err := node.Client.CoreV1().Namespaces().Delete(ctx(t), namespace, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, podWait, "namespace "+namespace+" to be gone", func(ctx context.Context) (bool, string) {
		ns, err := node.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s", ns.Status.Phase)
	})
}

var crdNames = []string{"bladeconfigs.kubeblade.io", "blades.kubeblade.io"}

func testDocsHelm(t *testing.T) {
	// A new cluster: no namespace, no CRDs (the SDK install's CRDs stayed
	// behind on purpose).
	waitNamespaceGone(t)
	for _, n := range crdNames {
		if err := apiextensions(t).Delete(ctx(t), n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the CRDs to be gone", func(ctx context.Context) (bool, string) {
		for _, n := range crdNames {
			if _, err := apiextensions(t).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, n + " still there"
			}
		}
		return true, ""
	})

	runDoc(t, "helm-install", repoRoot)
	waitPod(t, "app.kubernetes.io/component=operator", "the operator of the documented install to be Ready", nil)

	// The next release changes a CRD: the documented upgrade applies it over
	// the CRDs Helm installed (and owns, field by field), then upgrades the
	// release. Run in a copy of deploy/ with that change, as in a checkout
	// of the new release.
	next := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(repoRoot, "deploy"), next).CombinedOutput(); err != nil {
		t.Fatalf("copying deploy/: %v: %s", err, out)
	}
	const changed = "Priority decides between BladeConfigs (changed by the next release)."
	changeCRD(t, filepath.Join(next, "deploy/manifests/crds/crds.yaml"), changed)
	changeCRD(t, filepath.Join(next, chartDir, "crds/kubeblade.io_bladeconfigs.yaml"), changed)
	runDoc(t, "helm-upgrade", next)
	crd, err := apiextensions(t).Get(ctx(t), "bladeconfigs.kubeblade.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := priorityDescription(crd); got != changed {
		t.Errorf("after the documented CRD upgrade the BladeConfig CRD says %q, want %q", got, changed)
	}
	waitPod(t, "app.kubernetes.io/component=operator", "the operator after the documented upgrade", nil)

	runDoc(t, "helm-uninstall", repoRoot)
	assertUninstalled(t)
}

// changeCRD rewrites the BladeConfig CRD in a YAML file (a bundle or a
// single CRD) with a new description of spec.priority.
func changeCRD(t *testing.T, path, description string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	found := false
	for i, d := range docs {
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(d), &crd); err != nil || crd.Name != "bladeconfigs.kubeblade.io" {
			continue
		}
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		p := spec.Properties["priority"]
		p.Description = description
		spec.Properties["priority"] = p
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		out, err := yaml.Marshal(&crd)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = string(out)
		found = true
	}
	if !found {
		t.Fatalf("no BladeConfig CRD in %s", path)
	}
	if err := os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func priorityDescription(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["priority"].Description
		}
	}
	return ""
}

func testDocsManifests(t *testing.T) {
	waitNamespaceGone(t)
	runDoc(t, "manifests-install", repoRoot)
	waitPod(t, "app.kubernetes.io/component=operator", "the operator of the plain manifests to be Ready", nil)
	// The quick start's checks, as a reader runs them after any install.
	out := runDoc(t, "quickstart-check", repoRoot)
	if !strings.Contains(out, "default") {
		t.Errorf("the quick start's checks do not list the default BladeConfig:\n%s", out)
	}
	runDoc(t, "manifests-uninstall", repoRoot)
	if _, err := node.Client.CoreV1().Namespaces().Get(ctx(t), namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the documented removal: %v, want it gone", namespace, err)
	}
	assertUninstalled(t)
}

// testDocsSelfHost runs install.md's "Install from your own registry" as
// written: in a clone of the repository at the release's tag, `make
// release` and `make publish` into the suite's registry (its own CA, given
// through SSL_CERT_FILE as the section says), then the Helm commands that
// install the chart from there with the image from there, which the node's
// containerd pulls. VERSION is the chart's appVersion, the one the
// section's `export VERSION=` names (hack/deploy's TestOneVersionEverywhere).
func testDocsSelfHost(t *testing.T) {
	waitNamespaceGone(t)
	version := loadChart(t).Metadata.AppVersion
	registry := reg.Host + "/selfhost"
	clone := filepath.Join(t.TempDir(), "kubeblade")
	gitRun := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx(t), "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitRun(repoRoot, "clone", "-q", repoRoot, clone)
	// The release's tag, as cutting the release makes it (docs/releasing.md),
	// unless the history has it already.
	if gitRun(clone, "tag", "--list", version) == "" {
		gitRun(clone, "tag", version)
	}
	// The blocks run with HOME in a temporary directory: Go's caches are
	// named, so that the clone's builds reuse what this machine compiled.
	goenv, err := exec.CommandContext(ctx(t), "go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	caches := strings.Fields(string(goenv))
	if len(caches) != 3 {
		t.Fatalf("go env printed %q", goenv)
	}
	env := []string{"VERSION=" + version, "REGISTRY=" + registry, "SSL_CERT_FILE=" + reg.CAFile,
		"GOCACHE=" + caches[0], "GOMODCACHE=" + caches[1], "GOPATH=" + caches[2]}
	runDocEnv(t, "selfhost-publish", clone, env)
	for _, f := range []string{"dist/SHA256SUMS", "release.key"} {
		if _, err := os.Stat(filepath.Join(clone, f)); err != nil {
			t.Errorf("after the documented release: %v", err)
		}
	}
	runDocEnv(t, "selfhost-helm", clone, env)
	want := registry + "/kubeblade:" + version
	waitPod(t, "app.kubernetes.io/component=operator", "the operator installed from the registry to be Ready", func(p *corev1.Pod) (bool, string) {
		for _, c := range p.Spec.Containers {
			if c.Image != want {
				t.Fatalf("the operator's container %s runs %s, want %s", c.Name, c.Image, want)
			}
		}
		return true, ""
	})
	runDoc(t, "helm-uninstall", repoRoot)
	assertUninstalled(t)
}
