package render_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeblade/kubeblade/hack/deploy/render"
)

func load(t *testing.T) *chartv2.Chart {
	t.Helper()
	root, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := render.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && (name == "" || u.GetName() == name) {
			return u
		}
	}
	return nil
}

func TestSchemaRefusesBadValues(t *testing.T) {
	ch := load(t)
	cases := map[string]struct {
		values map[string]any
		want   []string
	}{
		"unknown top-level key":    {map[string]any{"replicas": 2}, []string{"additional properties 'replicas' not allowed"}},
		"unknown nested key":       {map[string]any{"operator": map[string]any{"leaderElect": true}}, []string{"/operator", "additional properties 'leaderElect' not allowed"}},
		"pull policy":              {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, []string{"/image/pullPolicy", "Always", "IfNotPresent"}},
		"port out of range":        {map[string]any{"operator": map[string]any{"metrics": map[string]any{"port": 70000}}}, []string{"/operator/metrics/port", "maximum"}},
		"port as string":           {map[string]any{"agent": map[string]any{"metrics": map[string]any{"port": "9666"}}}, []string{"/agent/metrics/port", "integer"}},
		"cleanup hook":             {map[string]any{"cleanup": map[string]any{"hook": "during-delete"}}, []string{"/cleanup/hook", "post-delete"}},
		"log level":                {map[string]any{"operator": map[string]any{"logLevel": "verbose"}}, []string{"/operator/logLevel"}},
		"bad digest":               {map[string]any{"image": map[string]any{"digest": "latest"}}, []string{"/image/digest"}},
		"label value not a string": {map[string]any{"commonLabels": map[string]any{"team": 7}}, []string{"/commonLabels/team", "string"}},
		"interval":                 {map[string]any{"serviceMonitor": map[string]any{"interval": "often"}}, []string{"/serviceMonitor/interval"}},
		// The repositories are written into the admission policy's CEL.
		"CEL in an allowed repository": {map[string]any{"agentImages": map[string]any{"allowedRepositories": []any{"x'] + ['evil"}}}, []string{"/agentImages/allowedRepositories/0"}},
		"repository with a tag":        {map[string]any{"image": map[string]any{"repository": "ghcr.io/kubeblade/kubeblade:v1'"}}, []string{"/image/repository"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render.Render(context.Background(), ch, render.Options{Values: tc.values})
			if err == nil {
				t.Fatal("values accepted, want a schema error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("error does not say it is a schema violation: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	res, err := render.Render(context.Background(), load(t), render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dep := find(res.Objects, "Deployment", "kubeblade-operator")
	if dep == nil {
		t.Fatal("no operator Deployment")
	}
	c, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	ctr := c[0].(map[string]any)
	args := strings.Join(toStrings(ctr["args"]), " ")
	for _, w := range []string{"--leader-elect=true", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--agent-service-account=kubeblade-agent",
		"--agent-image-repositories=ghcr.io/kubeblade/kubeblade"} {
		if !strings.Contains(args, w) {
			t.Errorf("operator args %q lack %s", args, w)
		}
	}
	sc := ctr["securityContext"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["runAsNonRoot"] != true || sc["allowPrivilegeEscalation"] != false {
		t.Errorf("operator securityContext not restricted: %v", sc)
	}
	if caps := sc["capabilities"].(map[string]any)["drop"]; len(caps.([]any)) != 1 || caps.([]any)[0] != "ALL" {
		t.Errorf("capabilities not dropped: %v", caps)
	}
	if ctr["livenessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"] != "/healthz" ||
		ctr["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"] != "/readyz" {
		t.Errorf("probes: %v %v", ctr["livenessProbe"], ctr["readinessProbe"])
	}
	if img := ctr["image"]; img != "ghcr.io/kubeblade/kubeblade:v0.1.0" {
		t.Errorf("image = %v, want the appVersion tag", img)
	}

	if find(res.Objects, "ServiceAccount", "kubeblade-agent") == nil || find(res.Objects, "ServiceAccount", "kubeblade-operator") == nil {
		t.Error("missing operator or agent ServiceAccount")
	}
	if find(res.Objects, "DaemonSet", "") != nil {
		t.Error("the chart must not template the agent DaemonSet: the operator creates it")
	}
	for _, kind := range []string{"Namespace", "ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if u := find(res.Objects, kind, ""); u != nil {
			t.Errorf("%s rendered by default", kind)
		}
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "BladeConfig"} {
		if find(res.Objects, kind, "") == nil {
			t.Errorf("no %s rendered", kind)
		}
	}
	job := find(res.Hooks, "Job", "kubeblade-cleanup")
	if job == nil {
		t.Fatal("no cleanup hook Job")
	}
	if got := job.GetAnnotations()["helm.sh/hook"]; got != "post-delete" {
		t.Errorf("cleanup hook = %q", got)
	}
	if !strings.Contains(res.Notes, "pod-security.kubernetes.io/enforce=privileged") {
		t.Errorf("NOTES do not say how to label the namespace:\n%s", res.Notes)
	}
}

// TestAllowedAgentRepositories: the admission policy allows the chart's
// own image repository and agentImages.allowedRepositories, once each.
func TestAllowedAgentRepositories(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"default": {nil, "['ghcr.io/kubeblade/kubeblade']"},
		"a mirror and a duplicate": {map[string]any{
			"image":       map[string]any{"repository": "registry.local:5000/mirror/kubeblade"},
			"agentImages": map[string]any{"allowedRepositories": []any{"ghcr.io/kubeblade/kubeblade", "registry.local:5000/mirror/kubeblade"}},
		}, "['registry.local:5000/mirror/kubeblade', 'ghcr.io/kubeblade/kubeblade']"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := render.Render(context.Background(), load(t), render.Options{Values: tc.values})
			if err != nil {
				t.Fatal(err)
			}
			// The BladeConfigs' policy and the operator's DaemonSet policy
			// allow the same repositories.
			for _, name := range []string{"kubeblade-agent-images", "kubeblade-operator-daemonsets"} {
				vap := find(res.Objects, "ValidatingAdmissionPolicy", name)
				if vap == nil {
					t.Fatalf("no %s policy", name)
				}
				vars, _, _ := unstructured.NestedSlice(vap.Object, "spec", "variables")
				got := ""
				for _, v := range vars {
					if m := v.(map[string]any); m["name"] == "allowedRepositories" {
						got, _ = m["expression"].(string)
					}
				}
				if got != tc.want {
					t.Errorf("%s: allowedRepositories = %q, want %q", name, got, tc.want)
				}
			}
			// The operator gets the same list.
			dep := find(res.Objects, "Deployment", "kubeblade-operator")
			c, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			args := strings.Join(toStrings(c[0].(map[string]any)["args"]), " ")
			list := strings.NewReplacer("['", "", "']", "", "', '", ",").Replace(tc.want)
			if !strings.Contains(args, "--agent-image-repositories="+list) {
				t.Errorf("operator args %q lack --agent-image-repositories=%s", args, list)
			}
		})
	}
}

// TestOperatorPoliciesMatchItsServiceAccount: the operator's admission
// policies confine the ServiceAccount the chart runs the operator as, in
// the release namespace, whatever it is named.
func TestOperatorPoliciesMatchItsServiceAccount(t *testing.T) {
	for name, tc := range map[string]struct {
		release, namespace string
		values             map[string]any
		user               string
	}{
		"defaults":     {"kubeblade", "kubeblade-system", nil, "system:serviceaccount:kubeblade-system:kubeblade-operator"},
		"release name": {"kb", "blades", nil, "system:serviceaccount:blades:kb-kubeblade-operator"},
		"named ServiceAccount": {"kb", "blades", map[string]any{"operator": map[string]any{"serviceAccount": map[string]any{"name": "blade-operator"}}},
			"system:serviceaccount:blades:blade-operator"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := render.Render(context.Background(), load(t), render.Options{ReleaseName: tc.release, Namespace: tc.namespace, Values: tc.values})
			if err != nil {
				t.Fatal(err)
			}
			dep := find(res.Objects, "Deployment", "")
			sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
			if want := "system:serviceaccount:" + tc.namespace + ":" + sa; want != tc.user {
				t.Fatalf("the operator runs as %s, the test expects %s", want, tc.user)
			}
			for _, policy := range []string{"kubeblade-operator-daemonsets", "kubeblade-operator-nodes"} {
				vap := find(res.Objects, "ValidatingAdmissionPolicy", policy)
				if vap == nil {
					t.Fatalf("no %s policy", policy)
				}
				conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
				if len(conds) != 1 || conds[0].(map[string]any)["expression"] != `request.userInfo.username == "`+tc.user+`"` {
					t.Errorf("%s matches %v, want the user %s", policy, conds, tc.user)
				}
			}
			ds := find(res.Objects, "ValidatingAdmissionPolicy", "kubeblade-operator-daemonsets")
			vals, _, _ := unstructured.NestedSlice(ds.Object, "spec", "validations")
			if expr, _ := vals[0].(map[string]any)["expression"].(string); expr != `request.namespace == "`+tc.namespace+`"` {
				t.Errorf("the DaemonSet policy's namespace check is %q, want the release namespace %s", expr, tc.namespace)
			}
		})
	}
}

func TestCRDsKeptOnUninstall(t *testing.T) {
	crds := render.CRDs(load(t))
	if len(crds) != 2 {
		t.Fatalf("%d CRD files, want 2", len(crds))
	}
	for _, c := range crds {
		objs, err := render.Decode(c.File.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s lacks helm.sh/resource-policy: keep", c.Filename)
			}
		}
	}
}

func TestNamespaceAndMonitoring(t *testing.T) {
	res, err := render.Render(context.Background(), load(t), render.Options{Values: map[string]any{
		"namespace":        map[string]any{"create": true},
		"serviceMonitor":   map[string]any{"enabled": true},
		"prometheusRule":   map[string]any{"enabled": true},
		"grafanaDashboard": map[string]any{"enabled": true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ns := find(res.Objects, "Namespace", "kubeblade-system")
	if ns == nil || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Fatalf("namespace not labelled privileged: %v", ns)
	}
	rule := find(res.Objects, "PrometheusRule", "")
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	exprs := map[string]string{}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			exprs[r["alert"].(string)] = r["expr"].(string)
		}
	}
	for alert, metric := range map[string]string{
		"KubebladeThermalCritical":     "kubeblade_thermal_critical",
		"KubebladeFanStalled":          "kubeblade_fan_stalled",
		"KubebladeAgentDown":           `up{job="kubeblade-agent"}`,
		"KubebladeAgentMissing":        "kube_node_labels",
		"KubebladeCertificateExpiring": "kubeblade_certificate_expiry_timestamp_seconds",
	} {
		if !strings.Contains(exprs[alert], metric) {
			t.Errorf("alert %s: expr %q does not use %s", alert, exprs[alert], metric)
		}
	}
	cm := find(res.Objects, "ConfigMap", "kubeblade-dashboard")
	if cm == nil || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap: %v", cm)
	}
	if js, _, _ := unstructured.NestedString(cm.Object, "data", "kubeblade.json"); !strings.Contains(js, "kubeblade_soc_temperature_celsius") {
		t.Error("dashboard JSON not embedded")
	}
	if n := len(filter(res.Objects, "ServiceMonitor")); n != 2 {
		t.Errorf("%d ServiceMonitors, want operator and agent", n)
	}
}

func TestServiceMonitorNeedsServices(t *testing.T) {
	_, err := render.Render(context.Background(), load(t), render.Options{Values: map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"metricsService": map[string]any{"enabled": false},
	}})
	if err == nil || !strings.Contains(err.Error(), "serviceMonitor.enabled needs metricsService.enabled") {
		t.Fatalf("err = %v", err)
	}
}

func filter(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestOneImageTagEverywhere: the chart's appVersion is the image tag that
// `make image` stamps (the git tag, with its "v"), and every document and
// rendered manifest names that tag, so no install path asks for an image
// that was never pushed.
func TestOneImageTagEverywhere(t *testing.T) {
	root, err := render.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := render.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	app, ver := ch.Metadata.AppVersion, ch.Metadata.Version
	if app != "v"+ver {
		t.Errorf("appVersion %q, want the chart version with the git tag's v: %q", app, "v"+ver)
	}
	ref := regexp.MustCompile(`ghcr\.io/kubeblade/kubeblade:([A-Za-z0-9_.-]+)`)
	var files []string
	for _, glob := range []string{"docs/*.md", "README.md", "deploy/helm/kubeblade/README.md", "deploy/manifests/*.yaml", "deploy/flux/*.yaml", "deploy/flux/app/*.yaml"} {
		m, _ := filepath.Glob(filepath.Join(root, glob))
		files = append(files, m...)
	}
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(raw), -1) {
			seen++
			if m[1] != app {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s names %s, want the tag %s", rel, m[0], app)
			}
		}
	}
	if seen == 0 {
		t.Error("no image reference found: the scan is broken")
	}
}
