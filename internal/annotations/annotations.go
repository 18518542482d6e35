// Package annotations reads the Node annotations through which people
// command a blade (kubeblade.io/identify, kubeblade.io/stealth,
// kubeblade.io/fan-speed) into requests, and says exactly what is wrong with
// a value it cannot accept.
package annotations

import (
	"fmt"
	"strconv"
	"strings"

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
}

// Invalid is an annotation whose value was refused.
type Invalid struct {
	Key, Value, Reason string
}

func (i Invalid) String() string {
	return fmt.Sprintf("annotation %s=%q is invalid: %s; nothing was changed", i.Key, i.Value, i.Reason)
}

// Parse reads the kubeblade annotations from a Node's annotations. Invalid
// values are returned separately and their requests left nil, so a bad value
// changes nothing.
func Parse(ann map[string]string) (Requests, []Invalid) {
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
	return r, bad
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
