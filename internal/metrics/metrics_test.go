package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

type fakeSource struct {
	st agent.Status
	c  agent.Counters
}

func (f fakeSource) Status() agent.Status     { return f.st }
func (f fakeSource) Counters() agent.Counters { return f.c }

func TestCollector(t *testing.T) {
	src := fakeSource{
		st: agent.Status{
			Status: core.Status{
				TemperatureCelsius: 61.5, TemperatureValid: true,
				FanRPM: 4800, FanRPMValid: true, FanPercent: 100, FanMode: core.FanModeCritical,
				Critical: true, PowerSource: hardware.PowerPoEPlus,
			},
			Info:         hardware.Info{Backend: "simulated", SoC: "simulated", FanUnit: hardware.FanUnitStandard},
			Capabilities: hardware.Capabilities{hardware.CapFan: true},
			Settings:     core.Settings{CriticalCelsius: 60},
			Version:      "v1.2.3",
			Running:      true,
		},
		c: agent.Counters{
			Events:         map[core.Reason]uint64{core.ReasonCriticalTemperature: 2, core.ReasonStatusChanged: 99},
			HardwareErrors: map[string]uint64{"led": 3},
			ButtonEdges:    5, ButtonPresses: 2, Samples: 10, BusDropped: 1,
		},
	}
	want := `
# HELP kubeblade_soc_temperature_celsius SoC temperature.
# TYPE kubeblade_soc_temperature_celsius gauge
kubeblade_soc_temperature_celsius 61.5
# HELP kubeblade_fan_duty_ratio Fan PWM duty, 0 to 1.
# TYPE kubeblade_fan_duty_ratio gauge
kubeblade_fan_duty_ratio 1
# HELP kubeblade_fan_rpm Fan speed from the tachometer.
# TYPE kubeblade_fan_rpm gauge
kubeblade_fan_rpm 4800
# HELP kubeblade_thermal_critical 1 while the blade is in critical temperature mode.
# TYPE kubeblade_thermal_critical gauge
kubeblade_thermal_critical 1
# HELP kubeblade_fan_mode 1 for the fan mode in force (auto, manual, critical).
# TYPE kubeblade_fan_mode gauge
kubeblade_fan_mode{mode="auto"} 0
kubeblade_fan_mode{mode="critical"} 1
kubeblade_fan_mode{mode="manual"} 0
# HELP kubeblade_events_total Blade events raised, by reason.
# TYPE kubeblade_events_total counter
kubeblade_events_total{reason="CriticalTemperature"} 2
# HELP kubeblade_hardware_errors_total Failed hardware operations, by operation.
# TYPE kubeblade_hardware_errors_total counter
kubeblade_hardware_errors_total{op="led"} 3
# HELP kubeblade_capability_available 1 if the hardware capability is available, 0 if missing.
# TYPE kubeblade_capability_available gauge
kubeblade_capability_available{capability="airflow-temperature"} 0
kubeblade_capability_available{capability="button"} 0
kubeblade_capability_available{capability="fan"} 1
kubeblade_capability_available{capability="leds"} 0
kubeblade_capability_available{capability="poe-detect"} 0
kubeblade_capability_available{capability="stealth"} 0
kubeblade_capability_available{capability="tach"} 0
kubeblade_capability_available{capability="temperature"} 0
# HELP kubeblade_agent_info Agent build and hardware identity; always 1.
# TYPE kubeblade_agent_info gauge
kubeblade_agent_info{backend="simulated",fan_unit="standard",soc="simulated",version="v1.2.3"} 1
`
	names := []string{"kubeblade_soc_temperature_celsius", "kubeblade_fan_duty_ratio", "kubeblade_fan_rpm",
		"kubeblade_thermal_critical", "kubeblade_fan_mode", "kubeblade_events_total", "kubeblade_hardware_errors_total",
		"kubeblade_capability_available", "kubeblade_agent_info"}
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidReadingsAreOmitted(t *testing.T) {
	src := fakeSource{st: agent.Status{}, c: agent.Counters{}}
	n := testutil.CollectAndCount(NewCollector(src), "kubeblade_soc_temperature_celsius", "kubeblade_fan_rpm", "kubeblade_power_source")
	if n != 0 {
		t.Fatalf("%d series for readings that were never taken", n)
	}
}

func TestRegistryLints(t *testing.T) {
	reg := NewRegistry(fakeSource{c: agent.Counters{Events: map[core.Reason]uint64{}}})
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "kubeblade_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}
