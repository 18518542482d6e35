package apply_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeblade/kubeblade/hack/deploy/render"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// nfdModule is the Node Feature Discovery release whose CRDs the chart's
// NodeFeatureRule is checked against (its module zip carries them under
// deployment/base/nfd-crds/).
const nfdModule = "sigs.k8s.io/node-feature-discovery@v0.19.0"

// nfdCRDs downloads NFD's module through the Go module proxy (cached in
// the module cache after the first run) and returns its CRDs.
func nfdCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", nfdModule)
	cmd.Dir = t.TempDir() // outside any module: no go.mod is read or changed
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); err != nil || jerr != nil || mod.Error != "" {
		testreq.Unavailable(t, "NFD's CRDs: go mod download %s: %s", nfdModule, strings.TrimSpace(mod.Error+" "+stderr.String()))
	}
	data, err := os.ReadFile(filepath.Join(mod.Dir, "deployment", "base", "nfd-crds", "nfd-api-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestNodeFeatureRule renders the chart with nodeFeatureRule.enabled and
// applies its NodeFeatureRule to an API server that serves NFD's own CRD,
// whose schema validates it; a rule with an operator NFD does not know is
// refused. With the defaults the chart renders no NodeFeatureRule.
func TestNodeFeatureRule(t *testing.T) {
	testenv.Need(t)
	crds := nfdCRDs(t)
	applyAll(t, crds)
	for _, u := range crds {
		if err := waitEstablished(ctx(t), u.GetName()); err != nil {
			t.Fatalf("NFD CRD %s: %v", u.GetName(), err)
		}
	}
	ch, err := render.Load(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	rules := func(values map[string]any) []*unstructured.Unstructured {
		res, err := render.Render(ctx(t), ch, render.Options{ReleaseName: "kubeblade", Namespace: "kubeblade-system", Values: values})
		if err != nil {
			t.Fatal(err)
		}
		var out []*unstructured.Unstructured
		for _, u := range append(res.Objects, res.Hooks...) {
			if u.GetKind() == "NodeFeatureRule" {
				out = append(out, u)
			}
		}
		return out
	}
	if got := rules(nil); len(got) != 0 {
		t.Fatalf("the defaults render %d NodeFeatureRules, want none", len(got))
	}
	got := rules(map[string]any{"nodeFeatureRule": map[string]any{"enabled": true, "labels": map[string]any{"team": "homelab"}}})
	if len(got) != 1 {
		t.Fatalf("nodeFeatureRule.enabled renders %d NodeFeatureRules, want 1", len(got))
	}
	rule := got[0]
	if rule.GetAPIVersion() != "nfd.k8s-sigs.io/v1alpha1" || rule.GetName() != "kubeblade-blades" || rule.GetLabels()["team"] != "homelab" {
		t.Errorf("rule %s %s labels %v", rule.GetAPIVersion(), rule.GetName(), rule.GetLabels())
	}
	if err := apply(ctx(t), rule); err != nil {
		t.Fatalf("the API server refused the chart's NodeFeatureRule: %v", err)
	}

	// One board label per rule, for the boards the agent calls blades.
	specRules, _, _ := unstructured.NestedSlice(rule.Object, "spec", "rules")
	var boards []string
	for _, r := range specRules {
		l, _, _ := unstructured.NestedString(r.(map[string]any), "labels", "feature.node.kubernetes.io/kubeblade-board")
		boards = append(boards, l)
	}
	if !slices.Equal(boards, []string{"cm4", "cm5", "radxa-cm5"}) {
		t.Errorf("boards labelled %q", boards)
	}
	// Every compatible string the agent's detection knows appears in a rule.
	raw, _ := json.Marshal(specRules)
	detect, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "hardware", "linux", "detect.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"raspberrypi,4-compute-module", "raspberrypi,5-compute-module", "radxa,cm5",
		"brcm,bcm2711", "brcm,bcm2712", "rockchip,rk3588", "rockchip,rk3588s"} {
		if !bytes.Contains(detect, []byte(`"`+c+`"`)) {
			t.Errorf("the agent's detect.go no longer knows %q: update the NodeFeatureRule", c)
		}
		if !bytes.Contains(raw, []byte(`"kubeblade.io/compatible.`+c+`"`)) {
			t.Errorf("the NodeFeatureRule does not match %q", c)
		}
	}

	// NFD's schema is really in force: an unknown operator is refused.
	bad := rule.DeepCopy()
	bad.SetName("kubeblade-blades-bad")
	first := specRules[0].(map[string]any)
	mf := first["matchFeatures"].([]any)[0].(map[string]any)
	mf["matchExpressions"] = map[string]any{"kubeblade.io/compatible.brcm,bcm2711": map[string]any{"op": "Exist"}}
	if err := unstructured.SetNestedSlice(bad.Object, []any{first}, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	err = apply(ctx(t), bad)
	if err == nil || !strings.Contains(err.Error(), `Unsupported value: "Exist"`) {
		t.Fatalf("a rule with op Exist: %v, want NFD's schema to refuse it", err)
	}
}

// TestNodeFeatureRuleMatchesTheDocumentedFeatureFile runs docs/install.md's
// feature-file command on the devicetree `compatible` of blades and of
// other boards, reads the file as NFD's local source does, and evaluates
// the chart's rules on it: each blade gets its board label, other boards
// none. The evaluation models NFD v0.19.0 for the only forms the rule
// uses: source/local/local.go's parseFeatureFile (`key[=value]` lines into
// the local.feature set; `# +no-label` drops only the label) and
// pkg/apis/nfd/nodefeaturerule's Exists (the element is present), all
// matchFeatures terms of a rule, or any one of its matchAny entries.
func TestNodeFeatureRuleMatchesTheDocumentedFeatureFile(t *testing.T) {
	pipeline := docPipeline(t)
	ch, err := render.Load(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(ctx(t), ch, render.Options{ReleaseName: "kubeblade", Namespace: "kubeblade-system",
		Values: map[string]any{"nodeFeatureRule": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	var rules []any
	for _, u := range res.Objects {
		if u.GetKind() == "NodeFeatureRule" {
			rules, _, _ = unstructured.NestedSlice(u.Object, "spec", "rules")
		}
	}
	if len(rules) == 0 {
		t.Fatal("no NodeFeatureRule rendered")
	}
	for _, tc := range []struct {
		name   string
		compat []string
		want   string
	}{
		{"CM4 blade", []string{"raspberrypi,4-compute-module", "brcm,bcm2711"}, "cm4"},
		{"CM5 blade", []string{"raspberrypi,5-compute-module", "brcm,bcm2712"}, "cm5"},
		{"Radxa CM5, mainline", []string{"radxa,cm5-io", "radxa,cm5", "rockchip,rk3588s"}, "radxa-cm5"},
		{"Radxa CM5, Radxa's kernel", []string{"radxa,cm5", "rockchip,rk3588"}, "radxa-cm5"},
		{"Raspberry Pi 4 B", []string{"raspberrypi,4-model-b", "brcm,bcm2711"}, ""},
		{"Raspberry Pi 5", []string{"raspberrypi,5-model-b", "brcm,bcm2712"}, ""},
		{"Rock 5B", []string{"radxa,rock-5b", "rockchip,rk3588"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			compat := filepath.Join(dir, "compatible")
			if err := os.WriteFile(compat, []byte(strings.Join(tc.compat, "\x00")+"\x00"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("sh", "-c", strings.ReplaceAll(pipeline, "/proc/device-tree/compatible", compat)).Output()
			if err != nil {
				t.Fatalf("%s: %v", pipeline, err)
			}
			features := localFeatures(string(out))
			var got []string
			for _, r := range rules {
				r := r.(map[string]any)
				if ruleMatches(t, r, features) {
					l, _, _ := unstructured.NestedString(r, "labels", "feature.node.kubernetes.io/kubeblade-board")
					got = append(got, l)
				}
			}
			if want := []string{tc.want}; tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, want) {
				t.Fatalf("feature file:\n%s\nlabels %q, want %q", out, got, tc.want)
			}
		})
	}
}

// docPipeline is the documented command's `tr … | sed …` part, which
// writes the feature file's lines to stdout.
func docPipeline(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- nfd: feature-file -->\n```sh\n")
	block, _, _ = strings.Cut(block, "```")
	start := strings.Index(block, "tr ")
	end := strings.Index(block, "| sudo tee")
	if !ok || start < 0 || end < start {
		t.Fatalf("docs/install.md has no feature-file command after <!-- nfd: feature-file -->:\n%s", block)
	}
	return block[start:end]
}

// localFeatures reads a feature file into the local.feature set.
func localFeatures(file string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(file, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			v = "true"
		}
		out[k] = v
	}
	return out
}

func ruleMatches(t *testing.T, r map[string]any, features map[string]string) bool {
	t.Helper()
	terms := func(mf []any) bool {
		for _, term := range mf {
			term := term.(map[string]any)
			if term["feature"] != "local.feature" {
				t.Fatalf("rule term on %v: only local.feature is modelled", term["feature"])
			}
			for k, e := range term["matchExpressions"].(map[string]any) {
				if op := e.(map[string]any)["op"]; op != "Exists" {
					t.Fatalf("op %v: only Exists is modelled", op)
				}
				if _, ok := features[k]; !ok {
					return false
				}
			}
		}
		return true
	}
	if mf, ok := r["matchFeatures"].([]any); ok && !terms(mf) {
		return false
	}
	if alts, ok := r["matchAny"].([]any); ok {
		for _, a := range alts {
			if terms(a.(map[string]any)["matchFeatures"].([]any)) {
				return true
			}
		}
		return false
	}
	return true
}
