package apply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/kubeblade/kubeblade/hack/deploy/manifests"
	"github.com/kubeblade/kubeblade/hack/deploy/render"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var (
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	apiext apiextclient.Interface
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: []string{render.ChartDir + "/crds"}}, func(e *testenv.Env) {
		var err error
		if dyn, err = dynamic.NewForConfig(e.Config); err != nil {
			panic(err)
		}
		if apiext, err = apiextclient.NewForConfig(e.Config); err != nil {
			panic(err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
		if err != nil {
			panic(err)
		}
		mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		if err := installMonitoringStubs(context.Background()); err != nil {
			panic(err)
		}
	}))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// installMonitoringStubs installs schemaless stand-ins for the Prometheus
// Operator's CRDs, so ServiceMonitor and PrometheusRule objects can be
// applied too (their own schemas are the Prometheus Operator's business).
func installMonitoringStubs(c context.Context) error {
	preserve := true
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &preserve,
					}},
				}},
			},
		}
		if _, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Create(c, crd, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := waitEstablished(c, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(c context.Context, name string) error {
	return testwait.Poll(c, 30*time.Second, func(c context.Context) (bool, string) {
		crd, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(c, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("CRD %s conditions %+v", name, crd.Status.Conditions)
	})
}

// apply server-side applies u and returns the server's answer.
func apply(c context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		mapper.Reset()
		if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return err
		}
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		if u.GetNamespace() == "" {
			return fmt.Errorf("namespaced %s without a namespace", render.Describe(u))
		}
		ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	force := true
	_, err = ri.Patch(c, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "kubeblade-chart-test", Force: &force})
	return err
}

func applyAll(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if err := apply(ctx(t), u); err != nil {
			t.Errorf("the API server refused %s: %v", render.Describe(u), err)
		}
	}
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if err := apply(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
}

func TestCRDsEstablished(t *testing.T) {
	testenv.Need(t)
	ch, err := render.Load(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range render.CRDs(ch) {
		objs, err := render.Decode(c.File.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if err := waitEstablished(ctx(t), u.GetName()); err != nil {
				t.Errorf("CRD %s not Established: %v", u.GetName(), err)
			}
			got, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx(t), u.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s lacks helm.sh/resource-policy: keep", u.GetName())
			}
		}
	}
}

// TestChartApplies renders the chart for several value sets and applies
// every object, hooks included, to the API server.
func TestChartApplies(t *testing.T) {
	testenv.Need(t)
	ch, err := render.Load(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, release, namespace string
		createNS                 bool
		values                   map[string]any
	}{
		{name: "defaults", release: "kubeblade", namespace: "kubeblade-system"},
		{name: "namespace created and everything on", release: "kb", namespace: "blades", values: map[string]any{
			"namespace":        map[string]any{"create": true, "labels": map[string]any{"team": "homelab"}},
			"serviceMonitor":   map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}, "scrapeTimeout": "10s"},
			"prometheusRule":   map[string]any{"enabled": true, "additionalAlertLabels": map[string]any{"team": "homelab"}, "kubeStateMetrics": false},
			"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "Hardware"}},
			"cleanup":          map[string]any{"hook": "pre-delete"},
			"commonLabels":     map[string]any{"env": "lab"},
		}, createNS: true},
		{name: "customised operator and BladeConfig", release: "blades", namespace: "kb-custom", values: map[string]any{
			"fullnameOverride": "kb",
			"image":            map[string]any{"repository": "registry.lan/kubeblade", "digest": "sha256:" + strings.Repeat("ab", 32), "pullPolicy": "Always"},
			"imagePullSecrets": []any{"regcred"},
			"operator": map[string]any{
				"replicas":          2,
				"logLevel":          "debug",
				"metrics":           map[string]any{"port": 9090},
				"health":            map[string]any{"port": 9091},
				"extraArgs":         []any{"--kube-api-qps=50"},
				"extraEnv":          []any{map[string]any{"name": "TZ", "value": "UTC"}},
				"nodeSelector":      map[string]any{"kubernetes.io/arch": "arm64"},
				"tolerations":       []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
				"priorityClassName": "system-cluster-critical",
				"podAnnotations":    map[string]any{"example.com/scrape": "true"},
				"serviceAccount":    map[string]any{"name": "blade-operator", "annotations": map[string]any{"example.com/owner": "ops"}},
			},
			"bladeConfig": map[string]any{"name": "rack-1", "spec": map[string]any{
				"priority":     10,
				"nodeSelector": map[string]any{"matchLabels": map[string]any{"topology.kubernetes.io/zone": "rack-1"}},
				"agent": map[string]any{
					"fanCurve":          []any{map[string]any{"temperatureCelsius": 40, "percent": 30}, map[string]any{"temperatureCelsius": 55, "percent": 100}},
					"criticalCelsius":   65,
					"hysteresisCelsius": 5,
					"taintOnCritical":   true,
					"leds":              map[string]any{"idleColor": "#000800"},
				},
				"daemonSet": map[string]any{"imagePullPolicy": "IfNotPresent", "priorityClassName": "system-node-critical"},
			}},
			"metricsService":  map[string]any{"enabled": false},
			"admissionPolicy": map[string]any{"enabled": false},
			"cleanup":         map[string]any{"enabled": false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := render.Render(ctx(t), ch, render.Options{ReleaseName: tc.release, Namespace: tc.namespace, Values: tc.values})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.createNS {
				createNamespace(t, tc.namespace)
			}
			applyAll(t, res.Objects)
			applyAll(t, res.Hooks)
			if tc.createNS {
				ns, err := dyn.Resource(nsGVR).Get(ctx(t), tc.namespace, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := ns.GetLabels()["pod-security.kubernetes.io/enforce"]; got != "privileged" {
					t.Errorf("namespace enforce label = %q", got)
				}
			}
		})
	}
}

// TestPlainManifestsApply applies deploy/manifests as a kustomize user would.
func TestPlainManifestsApply(t *testing.T) {
	testenv.Need(t)
	files, err := manifests.Files(ctx(t), testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"crds/crds.yaml", "kubeblade.yaml"} {
		objs, err := render.Decode(files[name])
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s holds no objects", name)
		}
		applyAll(t, objs)
	}
}

var nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
