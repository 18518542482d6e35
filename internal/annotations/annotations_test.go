package annotations

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func bp(b bool) *bool { return &b }

func sp(s string) *string { return &s }

func TestParse(t *testing.T) {
	cases := map[string]struct {
		ann     map[string]string
		want    Requests
		wantBad []Invalid
	}{
		"none":                  {nil, Requests{}, nil},
		"unrelated":             {map[string]string{"example.com/x": "1"}, Requests{}, nil},
		"identify true":         {map[string]string{"kubeblade.io/identify": "true"}, Requests{Identify: bp(true)}, nil},
		"identify false":        {map[string]string{"kubeblade.io/identify": "false"}, Requests{Identify: bp(false)}, nil},
		"stealth true":          {map[string]string{"kubeblade.io/stealth": "true"}, Requests{Stealth: bp(true)}, nil},
		"fan auto":              {map[string]string{"kubeblade.io/fan-speed": "auto"}, Requests{Fan: &Fan{Auto: true}}, nil},
		"fan 0":                 {map[string]string{"kubeblade.io/fan-speed": "0"}, Requests{Fan: &Fan{Percent: 0}}, nil},
		"fan 100":               {map[string]string{"kubeblade.io/fan-speed": "100"}, Requests{Fan: &Fan{Percent: 100}}, nil},
		"fan with percent":      {map[string]string{"kubeblade.io/fan-speed": "55%"}, Requests{Fan: &Fan{Percent: 55}}, nil},
		"whitespace":            {map[string]string{"kubeblade.io/identify": " true\n"}, Requests{Identify: bp(true)}, nil},
		"identify yes":          {map[string]string{"kubeblade.io/identify": "yes"}, Requests{}, []Invalid{{"kubeblade.io/identify", "yes", "want true or false"}}},
		"identify TRUE":         {map[string]string{"kubeblade.io/identify": "TRUE"}, Requests{}, []Invalid{{"kubeblade.io/identify", "TRUE", "want true or false"}}},
		"stealth empty":         {map[string]string{"kubeblade.io/stealth": ""}, Requests{}, []Invalid{{"kubeblade.io/stealth", "", "want true or false"}}},
		"fan 101":               {map[string]string{"kubeblade.io/fan-speed": "101"}, Requests{}, []Invalid{{"kubeblade.io/fan-speed", "101", "want auto or a percent from 0 to 100"}}},
		"fan negative":          {map[string]string{"kubeblade.io/fan-speed": "-5"}, Requests{}, []Invalid{{"kubeblade.io/fan-speed", "-5", "want auto or a percent from 0 to 100"}}},
		"fan fast":              {map[string]string{"kubeblade.io/fan-speed": "fast"}, Requests{}, []Invalid{{"kubeblade.io/fan-speed", "fast", "want auto or a percent from 0 to 100"}}},
		"fan fraction":          {map[string]string{"kubeblade.io/fan-speed": "50.5"}, Requests{}, []Invalid{{"kubeblade.io/fan-speed", "50.5", "want auto or a percent from 0 to 100"}}},
		"fan peer":              {map[string]string{"kubeblade.io/fan-peer": "blade-2"}, Requests{FanPeer: sp("blade-2")}, nil},
		"fan peer itself":       {map[string]string{"kubeblade.io/fan-peer": "blade-1"}, Requests{}, []Invalid{{"kubeblade.io/fan-peer", "blade-1", "a blade cannot be its own fan peer"}}},
		"fan peer not a label":  {map[string]string{"kubeblade.io/fan-peer": "Blade_2"}, Requests{}, []Invalid{{"kubeblade.io/fan-peer", "Blade_2", "want the name of the Node sharing this blade's fan unit, a DNS label: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}}},
		"fan peer dotted":       {map[string]string{"kubeblade.io/fan-peer": "blade-2.rack"}, Requests{}, []Invalid{{"kubeblade.io/fan-peer", "blade-2.rack", "want the name of the Node sharing this blade's fan unit, a DNS label: must not contain dots"}}},
		"maintenance true":      {map[string]string{"kubeblade.io/maintenance": "true"}, Requests{Maintenance: bp(true)}, nil},
		"maintenance sometimes": {map[string]string{"kubeblade.io/maintenance": "now"}, Requests{}, []Invalid{{"kubeblade.io/maintenance", "now", "want true or false"}}},
		"one bad one good": {map[string]string{"kubeblade.io/fan-speed": "loud", "kubeblade.io/stealth": "false"},
			Requests{Stealth: bp(false)}, []Invalid{{"kubeblade.io/fan-speed", "loud", "want auto or a percent from 0 to 100"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, bad := Parse(tc.ann, "blade-1")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBad, bad); diff != "" {
				t.Errorf("invalid (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvalidString(t *testing.T) {
	got := Invalid{"kubeblade.io/fan-speed", "fast", "want auto or a percent from 0 to 100"}.String()
	want := `annotation kubeblade.io/fan-speed="fast" is invalid: want auto or a percent from 0 to 100; nothing was changed`
	if got != want {
		t.Fatalf("got %q", got)
	}
}
