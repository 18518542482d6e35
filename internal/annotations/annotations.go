// Package annotations reads the Node annotations through which people
// command a blade (kubeblade.io/identify, kubeblade.io/stealth,
// kubeblade.io/fan-speed, kubeblade.io/fan-peer, kubeblade.io/maintenance)
// into requests, and says exactly what is wrong with a value it cannot
// accept.
package annotations

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// Fan is a fan request: Auto, or Percent 0–100.
type Fan struct {
	Auto    bool
	Percent int
}

// Requests are the commands annotations carry. A nil field means the
// annotation is absent: no opinion.
type Requests struct {
	Identify *bool
	Stealth  *bool
	Fan      *Fan
	// FanPeer names the blade sharing this one's standard fan unit.
	FanPeer *string
	// Maintenance asks for (true) or ends (false) maintenance.
	Maintenance *bool
}

// Invalid is an annotation whose value was refused.
type Invalid struct {
	Key, Value, Reason string
}

func (i Invalid) String() string {
	return fmt.Sprintf("annotation %s=%q is invalid: %s; nothing was changed", i.Key, i.Value, i.Reason)
}

// Parse reads the kubeblade annotations from the annotations of the Node
// named self. Invalid values are returned separately and their requests
// left nil, so a bad value changes nothing.
func Parse(ann map[string]string, self string) (Requests, []Invalid) {
	var r Requests
	var bad []Invalid
	if v, ok := ann[v1alpha1.AnnotationIdentify]; ok {
		if b, err := parseBool(v); err != nil {
			bad = append(bad, Invalid{v1alpha1.AnnotationIdentify, v, err.Error()})
		} else {
			r.Identify = &b
		}
	}
	if v, ok := ann[v1alpha1.AnnotationStealth]; ok {
		if b, err := parseBool(v); err != nil {
			bad = append(bad, Invalid{v1alpha1.AnnotationStealth, v, err.Error()})
		} else {
			r.Stealth = &b
		}
	}
	if v, ok := ann[v1alpha1.AnnotationFanSpeed]; ok {
		if f, err := parseFan(v); err != nil {
			bad = append(bad, Invalid{v1alpha1.AnnotationFanSpeed, v, err.Error()})
		} else {
			r.Fan = &f
		}
	}
	if v, ok := ann[v1alpha1.AnnotationFanPeer]; ok {
		if p, err := parseFanPeer(v, self); err != nil {
			bad = append(bad, Invalid{v1alpha1.AnnotationFanPeer, v, err.Error()})
		} else {
			r.FanPeer = &p
		}
	}
	if v, ok := ann[v1alpha1.AnnotationMaintenance]; ok {
		if b, err := parseBool(v); err != nil {
			bad = append(bad, Invalid{v1alpha1.AnnotationMaintenance, v, err.Error()})
		} else {
			r.Maintenance = &b
		}
	}
	return r, bad
}

// parseFanPeer accepts the name of another Node. Blades sharing a fan unit
// sit side by side in one chassis and are named by people, so the name
// must be a DNS label (docs/cluster-aware.md), not the blade itself.
func parseFanPeer(v, self string) (string, error) {
	s := strings.TrimSpace(v)
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return "", fmt.Errorf("want the name of the Node sharing this blade's fan unit, a DNS label: %s", strings.Join(errs, "; "))
	}
	if s == self {
		return "", fmt.Errorf("a blade cannot be its own fan peer")
	}
	return s, nil
}

// parseBool accepts exactly true and false: annotations are typed by
// people, and "yes" or "1" guessed wrong would switch hardware.
func parseBool(v string) (bool, error) {
	switch strings.TrimSpace(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

func parseFan(v string) (Fan, error) {
	s := strings.TrimSpace(v)
	if s == "auto" {
		return Fan{Auto: true}, nil
	}
	p, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || p < 0 || p > 100 {
		return Fan{}, fmt.Errorf("want auto or a percent from 0 to 100")
	}
	return Fan{Percent: p}, nil
}
