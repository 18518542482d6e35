// Package alerts tests the chart's PrometheusRule with Prometheus' own rule
// evaluator: `promtool test rules` runs testdata/alerts.test.yaml against
// the rules the chart renders, so a broken expression, label or annotation
// template fails here rather than in someone's Alertmanager.
package alerts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeblade/kubeblade/hack/deploy/render"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// promtool finds promtool: $PROMTOOL (make test sets it from
// hack/promtool.sh, which builds it once from its Go module), else PATH
// (Debian's prometheus package has one).
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		testreq.Unavailable(t, "no promtool: set PROMTOOL=$(hack/promtool.sh) (builds it once) or install Debian's prometheus package")
	}
	return p
}

// renderedRules renders the chart with the PrometheusRule on and returns
// its spec, which is a Prometheus rule file, and the alert names in it.
func renderedRules(t *testing.T) ([]byte, []string) {
	t.Helper()
	root, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := render.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Render(context.Background(), ch, render.Options{Values: map[string]any{
		"prometheusRule": map[string]any{"enabled": true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	var alerts []string
	for _, u := range res.Objects {
		if u.GetKind() != "PrometheusRule" {
			continue
		}
		spec, _, _ = unstructured.NestedMap(u.Object, "spec")
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				if a, ok := r.(map[string]any)["alert"].(string); ok {
					alerts = append(alerts, a)
				}
			}
		}
	}
	if spec == nil || len(alerts) == 0 {
		t.Fatal("the chart rendered no PrometheusRule with alerts")
	}
	out, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return out, alerts
}

// unitTests is the part of a promtool test file this test reads.
type unitTests struct {
	Tests []struct {
		Name           string `yaml:"name"`
		AlertRuleTests []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func TestEveryAlertFiresAndStaysSilent(t *testing.T) {
	rules, alerts := renderedRules(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ut unitTests
	if err := yaml.Unmarshal(raw, &ut); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range ut.Tests {
		for _, a := range tc.AlertRuleTests {
			if !slices.Contains(alerts, a.Alertname) {
				t.Errorf("test %q checks %s, which the chart does not define", tc.Name, a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s: no test where it fires (add one to testdata/alerts.test.yaml)", a)
		}
		if !silent[a] {
			t.Errorf("alert %s: no test where it stays silent on a healthy series", a)
		}
	}

	bin := promtool(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "test", "rules", filepath.Join(dir, "alerts.test.yaml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s: %d alerts, %d tests\n%s", bin, len(alerts), len(ut.Tests), out)
}
