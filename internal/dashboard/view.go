// Package dashboard is the server behind `bladectl dashboard`: a live rack
// view of a cluster's blades in the browser. It watches Blades, Nodes and
// Events with the caller's own credentials (one watch per kind, however many
// browser tabs are open), joins them into one view per blade, and pushes
// changes to every open page as server-sent events. The page itself (HTML,
// CSS, JavaScript) is embedded; nothing is loaded from elsewhere.
package dashboard

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// Names of the optional rack placement labels (docs/dashboard.md), the
// maintenance annotations (docs/cluster-aware.md) and the operator's stale-agent condition. They are
// the contract's names; the page renders them whoever writes them.
const (
	LabelChassis               = "kubeblade.io/chassis"
	LabelSlot                  = "kubeblade.io/slot"
	AnnotationMaintenance      = "kubeblade.io/maintenance"
	AnnotationMaintenanceState = "kubeblade.io/maintenance-state"
	ReasonHeartbeatStale       = "HeartbeatStale"
)

// Agent states of a blade on the page.
const (
	// AgentReporting: the Blade exists and is not stale.
	AgentReporting = "reporting"
	// AgentStale: the operator marked the Blade AgentReady=Unknown
	// (HeartbeatStale): what it shows is the last report.
	AgentStale = "stale"
	// AgentMissing: a Node that is meant to be a blade (it has rack labels
	// or a BladeConfig) but has no Blade, so no agent reports there.
	AgentMissing = "missing"
)

// Blade is one blade as the page draws it, joined from its Blade object
// (what the agent reports) and its Node (where it sits, what people and
// the operator asked for).
type Blade struct {
	Name    string `json:"name"`
	Chassis string `json:"chassis,omitempty"`
	// Slot is the 1-based slot from the slot label; 0 when there is none
	// or it is not a positive number (SlotLabel keeps what it said).
	Slot      int    `json:"slot,omitempty"`
	SlotLabel string `json:"slotLabel,omitempty"`
	Agent     string `json:"agent"`
	// State is the Blade's status.state (Critical, Identify, Idle, ...).
	State              string  `json:"state,omitempty"`
	TemperatureCelsius *int32  `json:"temperatureCelsius,omitempty"`
	AirflowCelsius     *int32  `json:"airflowCelsius,omitempty"`
	Fan                *Fan    `json:"fan,omitempty"`
	Power              string  `json:"power,omitempty"`
	LEDs               *LEDs   `json:"leds,omitempty"`
	Identify           bool    `json:"identify,omitempty"`
	Stealth            bool    `json:"stealth,omitempty"`
	Critical           bool    `json:"critical,omitempty"`
	Config             *Config `json:"config,omitempty"`
	// IdentifyRequested is the Node's kubeblade.io/identify annotation.
	IdentifyRequested string `json:"identifyRequested,omitempty"`
	// Maintenance is the operator's kubeblade.io/maintenance-state:
	// queued, draining, drained or failed.
	Maintenance          string `json:"maintenance,omitempty"`
	MaintenanceRequested bool   `json:"maintenanceRequested,omitempty"`
	// NodeNotReady: the Node's Ready condition is not True.
	NodeNotReady bool `json:"nodeNotReady,omitempty"`
	Cordoned     bool `json:"cordoned,omitempty"`
	// NoNode: a Blade whose Node is not (or no longer) there.
	NoNode bool `json:"noNode,omitempty"`
	// StaleMessage is the stale condition's message.
	StaleMessage        string     `json:"staleMessage,omitempty"`
	Heartbeat           *time.Time `json:"heartbeat,omitempty"`
	SoC                 string     `json:"soc,omitempty"`
	FanUnit             string     `json:"fanUnit,omitempty"`
	Backend             string     `json:"backend,omitempty"`
	AgentVersion        string     `json:"agentVersion,omitempty"`
	MissingCapabilities []string   `json:"missingCapabilities,omitempty"`
}

// Fan is the fan's state.
type Fan struct {
	Percent int32  `json:"percent"`
	RPM     *int32 `json:"rpm,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Stalled bool   `json:"stalled,omitempty"`
}

// LEDs are both LEDs as the agent drives them.
type LEDs struct {
	Top  LED `json:"top"`
	Edge LED `json:"edge"`
}

// LED is one LED: #rrggbb and off, steady or blink (one second period,
// phase from the wall clock, as internal/core renders it on the blade).
type LED struct {
	Color   string `json:"color,omitempty"`
	Pattern string `json:"pattern,omitempty"`
}

// Config is the BladeConfig generation the agent applied.
type Config struct {
	Name       string `json:"name,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// Event is one Kubernetes Event about a blade's Node.
type Event struct {
	ID     string    `json:"id"`
	Node   string    `json:"node"`
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	Reason string    `json:"reason"`
	Note   string    `json:"note,omitempty"`
	Count  int32     `json:"count,omitempty"`
	From   string    `json:"from,omitempty"`
}

// shown reports whether a Node without a Blade belongs on the page: it is
// placed in a chassis, or assigned to a BladeConfig, or labelled a blade.
func shown(n *corev1.Node) bool {
	l := n.Labels
	return l[LabelChassis] != "" || l[LabelSlot] != "" || l[v1alpha1.LabelConfig] != "" || l[v1alpha1.LabelBlade] == "true"
}

// view joins a Blade and its Node; either may be nil, not both.
func view(name string, b *v1alpha1.Blade, n *corev1.Node) Blade {
	v := Blade{Name: name, Agent: AgentMissing}
	if n != nil {
		placement(&v, n)
	} else {
		v.NoNode = true
	}
	if b == nil {
		return v
	}
	s := &b.Status
	v.Agent = AgentReporting
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.BladeConditionAgentReady); c != nil &&
		c.Status == metav1.ConditionUnknown && c.Reason == ReasonHeartbeatStale {
		v.Agent = AgentStale
		v.StaleMessage = c.Message
	}
	v.State = s.State
	v.TemperatureCelsius = s.TemperatureCelsius
	v.AirflowCelsius = s.AirflowTemperatureCelsius
	v.Fan = &Fan{Percent: s.Fan.Percent, RPM: s.Fan.RPM, Mode: s.Fan.Mode, Stalled: s.Fan.Stalled}
	v.Power = s.PowerSource
	if s.LEDs != (v1alpha1.BladeLEDsStatus{}) {
		v.LEDs = &LEDs{Top: LED(s.LEDs.Top), Edge: LED(s.LEDs.Edge)}
	}
	v.Identify, v.Stealth, v.Critical = s.Identify, s.Stealth, s.Critical
	if s.Config != nil {
		v.Config = &Config{Name: s.Config.Name, Generation: s.Config.Generation}
	}
	if s.HeartbeatTime != nil {
		t := s.HeartbeatTime.UTC()
		v.Heartbeat = &t
	}
	v.SoC, v.FanUnit, v.Backend, v.AgentVersion = s.SoC, s.FanUnit, s.HardwareBackend, s.AgentVersion
	v.MissingCapabilities = slices.Clone(s.MissingCapabilities)
	return v
}

func placement(v *Blade, n *corev1.Node) {
	v.Chassis = n.Labels[LabelChassis]
	if raw, ok := n.Labels[LabelSlot]; ok {
		if s, err := strconv.Atoi(strings.TrimSpace(raw)); err == nil && s > 0 {
			v.Slot = s
		} else {
			v.SlotLabel = raw
		}
	}
	a := n.Annotations
	v.IdentifyRequested = a[v1alpha1.AnnotationIdentify]
	v.Maintenance = a[AnnotationMaintenanceState]
	v.MaintenanceRequested = a[AnnotationMaintenance] == "true"
	v.Cordoned = n.Spec.Unschedulable
	v.NodeNotReady = true
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			v.NodeNotReady = c.Status != corev1.ConditionTrue
		}
	}
}

// slimNode keeps what the view reads of a Node: full Nodes carry images,
// addresses and managed fields the page never shows, and a thousand of
// them are tens of megabytes.
func slimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: map[string]string{},
	}}
	for k, v := range n.Labels {
		if strings.HasPrefix(k, "kubeblade.io/") {
			out.Labels[k] = v
		}
	}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, "kubeblade.io/") {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.Unschedulable = n.Spec.Unschedulable
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out
}

// eventView reads an events.k8s.io/v1 Event about a Node. Its time is the
// latest of the series, the event time and the deprecated timestamps, which
// is what `kubectl events` sorts by.
func eventView(e *eventsv1.Event) Event {
	v := Event{ID: string(e.UID), Node: e.Regarding.Name, Type: e.Type, Reason: e.Reason, Note: e.Note,
		From: e.ReportingController}
	if v.ID == "" {
		v.ID = e.Namespace + "/" + e.Name
	}
	if v.From == "" {
		v.From = e.DeprecatedSource.Component
	}
	v.Time = e.EventTime.Time
	for _, t := range []time.Time{e.DeprecatedLastTimestamp.Time, e.DeprecatedFirstTimestamp.Time, e.CreationTimestamp.Time} {
		if v.Time.IsZero() {
			v.Time = t
		}
	}
	v.Count = e.DeprecatedCount
	if e.Series != nil {
		v.Count = e.Series.Count
		if t := e.Series.LastObservedTime.Time; t.After(v.Time) {
			v.Time = t
		}
	}
	if e.DeprecatedLastTimestamp.After(v.Time) {
		v.Time = e.DeprecatedLastTimestamp.Time
	}
	v.Time = v.Time.UTC()
	return v
}
