package bladectl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/doctor"
)

// Output formats.
const (
	outTable = "table"
	outJSON  = "json"
	outYAML  = "yaml"
)

var outputs = []string{outTable, outJSON, outYAML}

// statusView is the stable, documented shape of a blade's status in JSON
// and YAML output; it is not the wire message, so scripts do not break
// when the API grows.
type statusView struct {
	TemperatureCelsius *float64           `json:"temperatureCelsius,omitempty"`
	FanPercent         uint32             `json:"fanPercent"`
	FanMode            string             `json:"fanMode"`
	FanRPM             *float64           `json:"fanRPM,omitempty"`
	FanStalled         bool               `json:"fanStalled"`
	Critical           bool               `json:"critical"`
	Identify           bool               `json:"identify"`
	Stealth            bool               `json:"stealth"`
	PowerSource        string             `json:"powerSource,omitempty"`
	LEDs               map[string]ledView `json:"leds"`
	Capabilities       []string           `json:"capabilities"`
	Hardware           hardwareView       `json:"hardware"`
	AgentVersion       string             `json:"agentVersion"`
	Config             string             `json:"config,omitempty"`
	Running            bool               `json:"running"`
}

type ledView struct {
	Pattern  string `json:"pattern"`
	Color    string `json:"color"`
	Override string `json:"override,omitempty"`
}

type hardwareView struct {
	Backend string `json:"backend"`
	SoC     string `json:"soc"`
	FanUnit string `json:"fanUnit"`
	IsBlade bool   `json:"isBlade"`
}

// result is one blade's answer to a command.
type result struct {
	Blade string `json:"blade"`
	// API is "compute-blade-agent" for an agent that serves only the old
	// API; empty for kubeblade's.
	API   string `json:"api,omitempty"`
	Error string `json:"error,omitempty"`
	// Unsupported marks an error that is the old API's limit.
	Unsupported bool        `json:"unsupported,omitempty"`
	Message     string      `json:"message,omitempty"`
	Status      *statusView `json:"status,omitempty"`
	// Doctor is bladectl doctor's report.
	Doctor *doctor.Report `json:"doctor,omitempty"`
}

func viewStatus(s *agentv1.Status) *statusView {
	if s == nil {
		return nil
	}
	v := &statusView{
		TemperatureCelsius: round1(s.TemperatureCelsius),
		FanPercent:         s.GetFanPercent(),
		FanMode:            enumName(s.GetFanMode().String(), "FAN_MODE_"),
		FanRPM:             round1(s.FanRpm),
		FanStalled:         s.GetFanStalled(),
		Critical:           s.GetCritical(),
		Identify:           s.GetIdentify(),
		Stealth:            s.GetStealth(),
		PowerSource:        s.GetPowerSource(),
		LEDs:               map[string]ledView{},
		Capabilities:       s.GetHardware().GetCapabilities(),
		Hardware: hardwareView{
			Backend: s.GetHardware().GetBackend(),
			SoC:     s.GetHardware().GetSoc(),
			FanUnit: s.GetHardware().GetFanUnit(),
			IsBlade: s.GetHardware().GetIsBlade(),
		},
		AgentVersion: s.GetVersion().GetVersion(),
		Config:       s.GetConfigName(),
		Running:      s.GetRunning(),
	}
	for _, l := range s.GetLeds() {
		lv := ledView{Pattern: enumName(l.GetPattern().String(), "LED_PATTERN_"), Color: hexColor(l.GetColor())}
		if l.Override != nil {
			lv.Override = hexColor(l.Override)
		}
		v.LEDs[enumName(l.GetLed().String(), "LED_")] = lv
	}
	return v
}

func round1(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := float64(int64(*p*10+0.5)) / 10
	return &v
}

func enumName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

// unknownColor is what a status without a readable colour shows.
const unknownColor = "unknown"

// hexColor prints c as #rrggbb; nil (a colour the status did not carry or
// that could not be read) is unknown, never black.
func hexColor(c *agentv1.Color) string {
	if c == nil {
		return unknownColor
	}
	return fmt.Sprintf("#%02x%02x%02x", c.GetRed(), c.GetGreen(), c.GetBlue())
}

// state sums up what the blade is doing in a word or two.
func (v *statusView) state() string {
	var parts []string
	if !v.Running {
		parts = append(parts, "stopped")
	}
	if v.Critical {
		parts = append(parts, "CRITICAL")
	}
	if v.FanStalled {
		parts = append(parts, "fan-stalled")
	}
	if v.Identify {
		parts = append(parts, "identify")
	}
	if v.Stealth {
		parts = append(parts, "stealth")
	}
	if len(parts) == 0 {
		return "ok"
	}
	return strings.Join(parts, ",")
}

func (v *statusView) temp() string {
	if v.TemperatureCelsius == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f°C", *v.TemperatureCelsius)
}

func (v *statusView) fan() string {
	s := fmt.Sprintf("%d%% %s", v.FanPercent, v.FanMode)
	if v.FanRPM != nil {
		s += fmt.Sprintf(" %.0frpm", *v.FanRPM)
	}
	return s
}

func (v *statusView) leds() string {
	led := func(name string) string {
		l, ok := v.LEDs[name]
		if !ok {
			return "-"
		}
		s := l.Color
		if l.Pattern == "off" {
			s = "off"
		} else if l.Pattern == "blink" {
			s += "(blink)"
		}
		return s
	}
	return led("top") + " " + led("edge")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printer writes results in the chosen format.
type printer struct {
	format string
	out    io.Writer
}

// encode writes v as JSON or YAML.
func (p printer) encode(v any) error {
	switch p.format {
	case outJSON:
		enc := json.NewEncoder(p.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = p.out.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q", p.format)
}

func (p printer) table(header string, rows [][]string) error {
	w := tabwriter.NewWriter(p.out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, header)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// statusTable prints the blades that answered; failures go to stderr.
func (p printer) statusTable(results []result) error {
	var rows [][]string
	for _, r := range results {
		if r.Status == nil {
			continue
		}
		v := r.Status
		agent := v.AgentVersion
		if r.API != "" {
			agent += " (" + r.API + ")"
		}
		rows = append(rows, []string{r.Blade, v.temp(), v.fan(), orDash(v.PowerSource), v.state(), v.leds(), agent})
	}
	if len(rows) == 0 {
		return nil
	}
	return p.table("BLADE\tTEMP\tFAN\tPOWER\tSTATE\tLEDS (TOP EDGE)\tAGENT", rows)
}

// monitorLine is one line of `bladectl monitor`.
func monitorLine(blade string, at time.Time, m *agentv1.WatchStatusResponse) []string {
	v := viewStatus(m.GetStatus())
	what := "status"
	if ev := m.GetEvent(); ev != nil {
		what = ev.GetReason()
	}
	return []string{at.Format("15:04:05"), blade, what, v.temp(), v.fan(), v.state()}
}

var monitorHeader = []string{"TIME", "BLADE", "CHANGE", "TEMP", "FAN", "STATE"}

// monitorRow lays a monitor line out in fixed columns: lines stream, so
// they cannot be aligned after the fact like a table.
func monitorRow(cols []string) string {
	return strings.TrimRight(fmt.Sprintf("%-8s  %-12s  %-20s  %-8s  %-20s  %s", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]), " ")
}
