// Package priorityclass checks the PriorityClass a BladeConfig asks its
// agent pods to run with. The API server accepts a DaemonSet naming a
// PriorityClass that does not exist but refuses every pod it creates, so a
// typo would leave the blades without an agent (and, on a rolling update,
// take the running agents away); the operator checks the name first and
// runs the agents with its default class until the named one exists.
package priorityclass

import (
	"context"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch

// Missing returns a message saying spec.daemonSet.priorityClassName names
// a PriorityClass that does not exist, or "" when the BladeConfig names
// none (the operator's default, system-node-critical, always exists) or an
// existing one. fallback is the class the agents run with meanwhile.
func Missing(ctx context.Context, c client.Reader, bc *kbv1.BladeConfig, fallback string) (string, error) {
	name := bc.Spec.DaemonSet.PriorityClassName
	if name == "" || name == fallback {
		return "", nil
	}
	err := c.Get(ctx, types.NamespacedName{Name: name}, Metadata())
	switch {
	case err == nil:
		return "", nil
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("spec.daemonSet.priorityClassName: PriorityClass %q does not exist, and the API server refuses pods naming it; "+
			"the agents run with %s until it exists", name, fallback), nil
	default:
		return "", fmt.Errorf("reading PriorityClass %s: %w", name, err)
	}
}

// Metadata is the object to watch and read PriorityClasses as: only
// whether one exists matters, so the operator caches their metadata.
func Metadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"))
	return m
}

// ConfigsNaming maps a PriorityClass event to the BladeConfigs whose
// spec.daemonSet.priorityClassName names it, so they are reconciled when it
// appears or goes away.
func ConfigsNaming(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var l kbv1.BladeConfigList
		if err := c.List(ctx, &l); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range l.Items {
			if l.Items[i].Spec.DaemonSet.PriorityClassName == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}})
			}
		}
		return out
	}
}
