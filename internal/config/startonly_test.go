package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
)

// Every section of an AgentConfig is either applied live, through the
// agent core's settings (or, for the taint, by the Kubernetes reporter),
// or read only at start, which the operator must know to roll the pods
// (agentconfigv1.StartOnly). A new section has to be put in one of them.
func TestEverySectionIsLiveOrStartOnly(t *testing.T) {
	live := []string{"fanCurve", "criticalCelsius", "hysteresisCelsius", "taintOnCritical", "stealth", "tachEnabled", "leds", "fanPeerLostPercent"}
	startOnly := jsonNames(reflect.TypeOf(agentconfigv1.StartOnly{}))
	all := jsonNames(reflect.TypeOf(agentconfigv1.AgentConfig{}))
	got := append(slices.Clone(live), startOnly...)
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Errorf("AgentConfig sections %v, but live %v + start-only %v", all, live, startOnly)
	}

	// The live ones really reach the core's settings.
	base, err := Check(Default())
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*agentconfigv1.AgentConfig){
		"fanCurve":             func(c *agentconfigv1.AgentConfig) { c.FanCurve[0].Percent++ },
		"criticalCelsius":      func(c *agentconfigv1.AgentConfig) { c.CriticalCelsius++ },
		"hysteresisCelsius":    func(c *agentconfigv1.AgentConfig) { c.HysteresisCelsius++ },
		"stealth":              func(c *agentconfigv1.AgentConfig) { c.Stealth = !c.Stealth },
		"tachEnabled":          func(c *agentconfigv1.AgentConfig) { off := false; c.TachEnabled = &off },
		"leds":                 func(c *agentconfigv1.AgentConfig) { c.LEDs.IdleColor = "#010203" },
		"leds.safeToPullColor": func(c *agentconfigv1.AgentConfig) { c.LEDs.SafeToPullColor = "#010203" },
		"fanPeerLostPercent":   func(c *agentconfigv1.AgentConfig) { p := int32(75); c.FanPeerLostPercent = &p },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Default()
			change(&cfg)
			c, err := Check(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(c.Settings, base.Settings) {
				t.Errorf("changing %s does not change the settings the agent applies live", name)
			}
		})
	}
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

func TestFromSpec(t *testing.T) {
	spec := agentconfigv1.AgentConfig{CriticalCelsius: 65, GRPC: agentconfigv1.GRPCConfig{SocketPath: "/run/kubeblade/shared.sock"}}
	c, err := FromSpec(spec, []string{"KUBEBLADE_GRPC_SOCKET_PATH=/host.sock"})
	if err != nil {
		t.Fatal(err)
	}
	// The spec over the defaults, the host's variables over the spec.
	if c.Config.CriticalCelsius != 65 || c.Settings.CriticalCelsius != 65 || c.Config.HysteresisCelsius != DefaultHysteresisCelsius ||
		c.Config.GRPC.SocketPath != "/host.sock" {
		t.Errorf("FromSpec = %+v", c.Config)
	}
	if _, err := FromSpec(agentconfigv1.AgentConfig{CriticalCelsius: 500}, nil); err == nil || !strings.Contains(err.Error(), "criticalCelsius: 500") {
		t.Errorf("an invalid spec: err %v", err)
	}
	if _, err := FromSpec(spec, []string{"KUBEBLADE_CRITICAL_CELSIUS=500"}); err == nil {
		t.Error("an invalid override was accepted")
	}
}
