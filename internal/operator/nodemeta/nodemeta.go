// Package nodemeta is the operator's view of Nodes: metadata only (the
// operator needs their labels, and caching 1 000 full Node objects with
// their status would cost far more), the predicate that lets only label
// changes through, and the label patches the controllers write.
package nodemeta

import (
	"context"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Node returns an empty metadata-only Node object.
func Node() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return m
}

// List returns an empty list of metadata-only Nodes.
func List() *metav1.PartialObjectMetadataList {
	m := &metav1.PartialObjectMetadataList{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	return m
}

// LabelsChanged passes Node creations and label changes, nothing else:
// status heartbeats must not wake a controller.
func LabelsChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !mapsEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// LabelPatch is the merge patch that sets label key to value (or, with
// value "", removes it) and touches nothing else on the Node.
func LabelPatch(key, value string) []byte {
	var v any
	if value != "" {
		v = value
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	return b
}

// RemoveLabelIf removes label key from a Node if it still has value: a
// JSON patch whose test operation makes the removal atomic, so a Node that
// was just given another value keeps it. A Node that is gone or whose
// label changed meanwhile is not an error.
func RemoveLabelIf(ctx context.Context, c client.Client, node, key, value string, opts ...client.PatchOption) error {
	path := "/metadata/labels/" + escapePointer(key)
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	})
	n := Node()
	n.Name = node
	err := c.Patch(ctx, n, client.RawPatch(types.JSONPatchType, patch), opts...)
	// NotFound: the Node is gone. Invalid: the test failed, the label
	// changed meanwhile and is no longer ours to remove.
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || isTestFailed(err) {
		return nil
	}
	return err
}

func isTestFailed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "test operation")
}

// escapePointer escapes a label key for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
