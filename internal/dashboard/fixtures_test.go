package dashboard

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// The fixtures are a small rack with one blade in each state the page
// distinguishes. Colours are the agent's defaults from internal/config.

var fixtureTime = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func i32(v int32) *int32 { return &v }

func node(name string, labels, annotations map[string]string, ready bool) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: st},
		}},
	}
}

func placed(chassis, slot string) map[string]string {
	return map[string]string{LabelChassis: chassis, LabelSlot: slot, v1alpha1.LabelConfig: "default"}
}

// idleStatus is a healthy blade's status at temp °C.
func idleStatus(temp int32) v1alpha1.BladeStatus {
	return v1alpha1.BladeStatus{
		State: v1alpha1.BladeStateIdle, SoC: "bcm2712", FanUnit: "standard", PowerSource: "poe-802.3at",
		TemperatureCelsius: i32(temp), Fan: v1alpha1.BladeFanStatus{Percent: 40, RPM: i32(3120), Mode: "auto"},
		LEDs: v1alpha1.BladeLEDsStatus{
			Top:  v1alpha1.LEDStatus{Color: "#000000", Pattern: "off"},
			Edge: v1alpha1.LEDStatus{Color: "#00ff00", Pattern: "steady"},
		},
		Capabilities: []string{"fan", "leds", "tach"}, HardwareBackend: "linux", AgentVersion: "v0.4.0",
		Config:        &v1alpha1.AppliedConfig{Name: "default", Generation: 3},
		Conditions:    []metav1.Condition{{Type: v1alpha1.BladeConditionAgentReady, Status: metav1.ConditionTrue, Reason: "Running"}},
		HeartbeatTime: &metav1.Time{Time: fixtureTime},
	}
}

func blade(name string, st v1alpha1.BladeStatus) *v1alpha1.Blade {
	st.NodeName = name
	return &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: st}
}

// fixtures returns the Nodes and Blades of the test rack.
func fixtures() ([]*corev1.Node, []*v1alpha1.Blade) {
	critical := idleStatus(83)
	critical.State, critical.Critical = v1alpha1.BladeStateCritical, true
	critical.Fan = v1alpha1.BladeFanStatus{Percent: 100, RPM: i32(7800), Mode: "critical"}
	critical.LEDs = v1alpha1.BladeLEDsStatus{
		Top:  v1alpha1.LEDStatus{Color: "#ff0000", Pattern: "blink"},
		Edge: v1alpha1.LEDStatus{Color: "#ff0000", Pattern: "steady"},
	}
	identify := idleStatus(51)
	identify.State, identify.Identify = v1alpha1.BladeStateIdentify, true
	identify.LEDs.Edge = v1alpha1.LEDStatus{Color: "#0000ff", Pattern: "blink"}
	stale := idleStatus(47)
	stale.Conditions = []metav1.Condition{{Type: v1alpha1.BladeConditionAgentReady, Status: metav1.ConditionUnknown,
		Reason: ReasonHeartbeatStale, Message: "no heartbeat for 16m"}}
	draining := idleStatus(44)
	draining.LEDs.Edge = v1alpha1.LEDStatus{Color: "#ffa500", Pattern: "blink"}
	stealth := idleStatus(39)
	stealth.State, stealth.Stealth = v1alpha1.BladeStateStealth, true
	stealth.PowerSource = "poe-or-usbc"
	stealth.Fan.RPM = nil
	stealth.MissingCapabilities = []string{"leds", "tach"}
	stealth.LEDs = v1alpha1.BladeLEDsStatus{}
	stealth.Config = &v1alpha1.AppliedConfig{}

	nodes := []*corev1.Node{
		node("blade-a1", placed("A", "1"), nil, true),
		node("blade-a2", placed("A", "2"), nil, true),
		node("blade-a3", placed("A", "3"), map[string]string{v1alpha1.AnnotationIdentify: "true"}, true),
		node("blade-a5", placed("A", "5"), nil, true),
		node("blade-b1", placed("B", "1"), map[string]string{AnnotationMaintenance: "true", AnnotationMaintenanceState: "draining"}, true),
		node("blade-b2", placed("B", "02"), nil, false),
		node("blade-b9", placed("B", "left"), nil, true),
		node("pi-pool", nil, nil, true),
		node("worker-1", map[string]string{"kubernetes.io/os": "linux"}, nil, true),
	}
	nodes[4].Spec.Unschedulable = true
	blades := []*v1alpha1.Blade{
		blade("blade-a1", idleStatus(42)),
		blade("blade-a2", critical),
		blade("blade-a3", identify),
		blade("blade-a5", stale),
		blade("blade-b1", draining),
		blade("blade-b9", idleStatus(35)),
		blade("pi-pool", stealth),
		blade("ghost", idleStatus(40)),
	}
	return nodes, blades
}

func event(name, node, reason, note string, at time.Time, warning bool) *eventsv1.Event {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: EventsNamespace, UID: types.UID("uid-" + name)},
		EventTime:  metav1.MicroTime{Time: at}, Reason: reason, Note: note, Type: typ,
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: node},
		ReportingController: "kubeblade.io/agent", ReportingInstance: node, Action: reason,
	}
}
