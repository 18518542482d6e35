package config

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// crdObject is the generated BladeConfig CRD's schema of an object inside
// spec.agent (the agent's own config), by JSON path: what the API server
// validates a BladeConfig with.
func crdObject(t *testing.T, path ...string) crdSchema {
	t.Helper()
	raw, err := os.ReadFile("../../config/crd/bases/kubeblade.io_bladeconfigs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		t.Fatalf("the BladeConfig CRD has %d versions; this test reads the one", len(crd.Spec.Versions))
	}
	props := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, p := range append([]string{"spec", "agent"}, path...) {
		next, ok := props.Properties[p]
		if !ok {
			t.Fatalf("the BladeConfig CRD has no %s in %v", p, path)
		}
		props = next
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&props, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := schema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	return crdSchema{s: s, path: field.NewPath("spec", append([]string{"agent"}, path...)...)}
}

// crdSchema is one object's schema in the CRD and where it sits.
type crdSchema struct {
	s    *schema.Structural
	path *field.Path
}

// crdAccepts runs the CEL rules of s and its fields on obj as the API
// server does for a custom resource (the apiextensions-apiserver's
// validator, with Kubernetes' CEL libraries: isIP, and the rest) and returns
// the errors. A rule that does not compile is an error too.
func crdAccepts(s crdSchema, obj map[string]any) field.ErrorList {
	v := cel.NewValidator(s.s, false, math.MaxInt64)
	if v == nil {
		return field.ErrorList{field.InternalError(s.path, errNoRules)}
	}
	errs, _ := v.Validate(context.Background(), s.path, s.s, obj, nil, math.MaxInt64)
	return errs
}

// errNoRules: the object has no CEL rules, so there is nothing to agree with.
var errNoRules = errors.New("the schema has no x-kubernetes-validations")

// agreeWithCRD checks that the agent's own check of a field and the CRD's
// CEL rule for it accept and refuse the same values, and that both give the
// answer the case expects. An empty value is the field left out: the
// types mark these fields omitempty, so the API server never sees "".
func agreeWithCRD(t *testing.T, s crdSchema, fieldName string, check func(string) error, cases map[string]bool) {
	t.Helper()
	for value, want := range cases {
		obj := map[string]any{}
		if value != "" {
			obj[fieldName] = value
		}
		crdErrs := crdAccepts(s, obj)
		for _, e := range crdErrs {
			if e.Type == field.ErrorTypeInternal {
				t.Fatalf("the CRD's rule did not run: %v", e)
			}
		}
		agentErr := check(value)
		if crd, agent := len(crdErrs) == 0, agentErr == nil; crd != want || agent != want {
			t.Errorf("%s %q: the CRD's rule accepts it: %v (%v); the agent's check accepts it: %v (%v); want %v",
				fieldName, value, crd, crdErrs.ToAggregate(), agent, agentErr, want)
		}
	}
}

// TestMetricsAddressAccepts: the CRD's CEL rule for metrics.bindAddress and
// ValidateMetricsAddress accept and refuse the same addresses, so a value
// the API server let through never fails the agent's own check, and the
// agent refuses in its config file what a BladeConfig could not hold.
func TestMetricsAddressAccepts(t *testing.T) {
	agreeWithCRD(t, crdObject(t, "metrics"), "bindAddress", ValidateMetricsAddress, map[string]bool{
		"":                 true, // left out: the default
		"0":                true, // disabled (a BladeConfig refuses it by a rule of its own)
		":9666":            true,
		"0.0.0.0:9666":     true,
		"127.0.0.1:0":      true,
		"192.0.2.10:65535": true,
		"[::]:9100":        true,
		"[::1]:9666":       true,
		"localhost:9666":   true,
		"blade-1.lan:9666": true,
		"9666":             false, // a port alone
		":65536":           false,
		":99999":           false,
		":":                false,
		"localhost:":       false,
		"localhost":        false,
		"[::1]":            false,
		"::1:9666":         false, // IPv6 without brackets
		"[fe80::1%eth0]:1": false, // a zone
		"host name:9666":   false,
		"http://x:9666":    false,
		":9666\n":          false,
		"00":               false,
		":-1":              false,
	})
}

// TestBindAddressMatchesCRD: the CRD's isIP rule for grpc.remote.bindAddress
// and ValidateBindAddress agree.
func TestBindAddressMatchesCRD(t *testing.T) {
	agreeWithCRD(t, crdObject(t, "grpc", "remote"), "bindAddress", ValidateBindAddress, map[string]bool{
		"":                 true, // left out: every interface
		"10.0.0.5":         true,
		"0.0.0.0":          true,
		"::":               true,
		"fd00::5":          true,
		"2001:db8::1":      true,
		"10.0.0.5:9443":    false,
		"blade-1":          false,
		"::ffff:10.0.0.5":  false, // IPv4-mapped
		"fe80::1%eth0":     false, // a zone
		"10.0.0.256":       false,
		"010.000.000.005":  false, // leading zeros
		"[fd00::5]":        false,
		" 10.0.0.5":        false,
		"10.0.0.5/24":      false,
		"2001:db8::1:9443": true, // a valid IPv6 address, not a port
	})
}
