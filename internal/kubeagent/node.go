package kubeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilptr "k8s.io/utils/ptr"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/kubeclient"
)

// FieldManager owns every field the agent writes with server-side apply.
const FieldManager = "kubeblade-agent"

var (
	// applyOptions server-side-apply the agent's fields, taking them over
	// from any other manager: the agent is the source of truth for them.
	applyOptions = metav1.PatchOptions{FieldManager: FieldManager, Force: utilptr.To(true)}
	patchOptions = metav1.PatchOptions{FieldManager: FieldManager}
)

// Node condition reasons.
const (
	ReasonNodeCritical = "CriticalTemperature"
	ReasonNodeNormal   = "TemperatureNormal"
)

// factLabels are the Node labels the agent owns (the operator owns
// kubeblade.io/config).
var factLabels = []string{v1alpha1.LabelBlade, v1alpha1.LabelSoC, v1alpha1.LabelFanUnit, v1alpha1.LabelPower}

// desiredLabels are the facts the agent publishes about its blade. A
// machine that is not a blade gets only kubeblade.io/blade=false, which moves
// the DaemonSet off it.
func desiredLabels(st agent.Status) map[string]string {
	if !st.Info.IsBlade {
		return map[string]string{v1alpha1.LabelBlade: "false"}
	}
	l := map[string]string{v1alpha1.LabelBlade: "true"}
	if st.Info.SoC != "" {
		l[v1alpha1.LabelSoC] = st.Info.SoC
	}
	if st.Info.FanUnit != "" {
		l[v1alpha1.LabelFanUnit] = string(st.Info.FanUnit)
	}
	if st.PowerSource != hardware.PowerUnknown {
		l[v1alpha1.LabelPower] = string(st.PowerSource)
	}
	return l
}

func labelsInSync(node *corev1.Node, want map[string]string) bool {
	for _, k := range factLabels {
		got, has := node.Labels[k]
		w, wanted := want[k]
		if has != wanted || got != w {
			return false
		}
	}
	return true
}

// applyLabels server-side-applies exactly the wanted fact labels. Keys the
// agent applied before and no longer wants are removed by the API server,
// because this field manager stops claiming them.
func applyLabels(ctx context.Context, nodes *kubeclient.NodeClient, node string, want map[string]string) error {
	patch := map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata":   map[string]any{"name": node, "labels": want},
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, node, types.ApplyPatchType, body, applyOptions)
	return err
}

func nodeCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == v1alpha1.NodeConditionThermalCritical {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// conditionInSync: a blade that never was critical needs no condition at
// all; once written, the condition tracks the state.
func conditionInSync(node *corev1.Node, critical bool) bool {
	c := nodeCondition(node)
	if c == nil {
		return !critical
	}
	return (c.Status == corev1.ConditionTrue) == critical
}

// patchCondition writes the BladeThermalCritical condition with a strategic
// merge patch, which merges by condition type and leaves the kubelet's
// conditions alone.
func patchCondition(ctx context.Context, nodes *kubeclient.NodeClient, node string, critical bool, now time.Time) error {
	cond := map[string]any{
		"type":               v1alpha1.NodeConditionThermalCritical,
		"status":             corev1.ConditionFalse,
		"reason":             ReasonNodeNormal,
		"message":            "SoC temperature is below the critical threshold",
		"lastHeartbeatTime":  now.UTC().Format(time.RFC3339),
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	if critical {
		cond["status"], cond["reason"] = corev1.ConditionTrue, ReasonNodeCritical
		cond["message"] = "SoC temperature reached the critical threshold; the fan is forced to 100 %"
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, node, types.StrategicMergePatchType, body, patchOptions, "status")
	return err
}

func hasTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == v1alpha1.TaintThermalCritical && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// setTaint adds or removes the thermal-critical taint. Node taints are an
// atomic list, so this is a merge patch guarded by the resourceVersion: it
// fails (and is retried with a fresh copy) rather than overwrite taints
// another controller changed meanwhile.
func setTaint(ctx context.Context, nodes *kubeclient.NodeClient, node *corev1.Node, want bool) error {
	// Only the agent's own taint (key and effect) is touched: the admission
	// policy refuses any other change to the list.
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != v1alpha1.TaintThermalCritical || t.Effect != corev1.TaintEffectNoSchedule {
			taints = append(taints, t)
		}
	}
	if want {
		now := metav1.Now()
		taints = append(taints, corev1.Taint{Key: v1alpha1.TaintThermalCritical, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
	}
	// A JSON merge patch replaces the list whole; null removes it.
	var list any
	if len(taints) > 0 {
		list = taints
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": list},
	})
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, node.Name, types.MergePatchType, body, patchOptions)
	return err
}

// removeAnnotation deletes one annotation if it still has the given value,
// so a person's newer value is never clobbered.
func removeAnnotation(ctx context.Context, nodes *kubeclient.NodeClient, node *corev1.Node, key, value string) error {
	if node.Annotations[key] != value {
		return nil
	}
	body, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/annotations/" + escapeJSONPointer(key), "value": value},
		{"op": "remove", "path": "/metadata/annotations/" + escapeJSONPointer(key)},
	})
	if err != nil {
		return err
	}
	if _, err := nodes.Patch(ctx, node.Name, types.JSONPatchType, body, patchOptions); err != nil {
		return fmt.Errorf("removing annotation %s: %w", key, err)
	}
	return nil
}

func escapeJSONPointer(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}
