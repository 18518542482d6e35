package nodemeta

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestLabelPatch(t *testing.T) {
	for name, tc := range map[string]struct {
		key, value, want string
	}{
		"set":    {"kubeblade.io/config", "gold", `{"metadata":{"labels":{"kubeblade.io/config":"gold"}}}`},
		"remove": {"kubeblade.io/config", "", `{"metadata":{"labels":{"kubeblade.io/config":null}}}`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := string(LabelPatch(tc.key, tc.value)); got != tc.want {
				t.Errorf("LabelPatch = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestEscapePointer(t *testing.T) {
	if got, want := escapePointer("kubeblade.io/a~b"), "kubeblade.io~1a~0b"; got != want {
		t.Errorf("escapePointer = %q, want %q", got, want)
	}
}

func TestLabelsChanged(t *testing.T) {
	node := func(l map[string]string) *metav1.PartialObjectMetadata {
		n := Node()
		n.Labels = l
		return n
	}
	p := LabelsChanged()
	for name, tc := range map[string]struct {
		old, new map[string]string
		want     bool
	}{
		"same labels (a heartbeat)": {map[string]string{"a": "1"}, map[string]string{"a": "1"}, false},
		"value changed":             {map[string]string{"a": "1"}, map[string]string{"a": "2"}, true},
		"label added":               {map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "1"}, true},
		"label removed":             {map[string]string{"a": "1"}, nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: node(tc.old), ObjectNew: node(tc.new)}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	if !p.Create(event.CreateEvent{Object: node(nil)}) || p.Delete(event.DeleteEvent{Object: node(nil)}) || p.Generic(event.GenericEvent{Object: node(nil)}) {
		t.Error("want creations only, besides label changes")
	}
}
