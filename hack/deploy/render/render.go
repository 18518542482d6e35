// Package render renders the kubeblade Helm chart with the Helm SDK, the way
// `helm template` does, for the plain manifests and for the tests that apply
// the result to a real API server.
package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ChartDir is the chart's directory relative to the repository root.
const ChartDir = "deploy/helm/kubeblade"

// Options say how to render.
type Options struct {
	// ReleaseName defaults to "kubeblade".
	ReleaseName string
	// Namespace defaults to "kubeblade-system".
	Namespace string
	// Values override the chart's values.yaml.
	Values map[string]any
	// KubeVersion is the Kubernetes version templates see; default
	// KubeVersion (what `helm template` would assume, pinned so the plain
	// manifests do not depend on the Helm SDK's build).
	KubeVersion string
}

// KubeVersion is the default Options.KubeVersion: the version the tests'
// API server runs.
const KubeVersion = "v1.37.0"

// Result is a rendered release.
type Result struct {
	// Manifest is the rendered templates, without CRDs and hooks, in Helm's
	// install order.
	Manifest string
	// Objects are Manifest's objects, in order.
	Objects []*unstructured.Unstructured
	// Hooks are the hook objects (e.g. the uninstall cleanup Job), by weight.
	Hooks []*unstructured.Unstructured
	// Notes is the rendered NOTES.txt.
	Notes string
}

// Load loads the chart from the repository root.
func Load(root string) (*chartv2.Chart, error) {
	return loader.Load(filepath.Join(root, ChartDir))
}

// Render renders ch like `helm template`: client only, schema validated.
func Render(ctx context.Context, ch *chartv2.Chart, o Options) (*Result, error) {
	if o.ReleaseName == "" {
		o.ReleaseName = "kubeblade"
	}
	if o.Namespace == "" {
		o.Namespace = "kubeblade-system"
	}
	vals := o.Values
	if vals == nil {
		vals = map[string]any{}
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true // no release storage to check names against
	install.ReleaseName = o.ReleaseName
	install.Namespace = o.Namespace
	install.IncludeCRDs = false // the CRDs come from crds/ unchanged; see CRDs
	if o.KubeVersion == "" {
		o.KubeVersion = KubeVersion
	}
	kv, err := common.ParseKubeVersion(o.KubeVersion)
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kv
	rel, err := install.RunWithContext(ctx, ch, vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("unexpected release type %T", rel)
	}
	res := &Result{Manifest: r.Manifest}
	if r.Info != nil {
		res.Notes = r.Info.Notes
	}
	if res.Objects, err = Decode([]byte(r.Manifest)); err != nil {
		return nil, err
	}
	hooks := append([]*releasev1.Hook(nil), r.Hooks...)
	sort.SliceStable(hooks, func(i, j int) bool { return hooks[i].Weight < hooks[j].Weight })
	for _, h := range hooks {
		objs, err := Decode([]byte(h.Manifest))
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", h.Path, err)
		}
		res.Hooks = append(res.Hooks, objs...)
	}
	return res, nil
}

// CRDs returns the chart's CRD files (crds/), sorted by file name.
func CRDs(ch *chartv2.Chart) []chartv2.CRD {
	crds := ch.CRDObjects()
	sort.Slice(crds, func(i, j int) bool { return crds[i].Filename < crds[j].Filename })
	return crds
}

// Decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("object without kind or apiVersion: %v", m)
		}
		out = append(out, u)
	}
}

// RepoRoot finds the repository root upwards from the working directory
// (the directory holding the chart).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ChartDir, "Chart.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (with " + ChartDir + ") not found above the working directory")
		}
		dir = parent
	}
}

// Describe names an object for messages: Kind namespace/name.
func Describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return strings.TrimSpace(u.GetKind() + " " + u.GetName())
}
