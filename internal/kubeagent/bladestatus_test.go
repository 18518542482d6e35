package kubeagent

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// TestBladeStatusCarriesTheDetail: the Blade carries the capability
// report's detail (why each capability is missing), which `bladectl
// doctor --node` reads, cut to the CRD's limit at a rune boundary.
func TestBladeStatusCarriesTheDetail(t *testing.T) {
	const detail = "devicetree compatible raspberrypi,4-compute-module; fan: none; missing fan: no PWM chip drives GPIO12"
	st := agent.Status{Info: hardware.Info{Backend: "linux", IsBlade: true, SoC: "bcm2711", Detail: detail}}
	if got := bladeStatus("n1", st, nil, nil, time.Now()).HardwareDetail; got != detail {
		t.Errorf("hardwareDetail %q, want %q", got, detail)
	}
	st.Info.Detail = strings.Repeat("é", maxHardwareDetail)
	got := bladeStatus("n1", st, nil, nil, time.Now()).HardwareDetail
	if len(got) > maxHardwareDetail || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("a long detail became %d bytes (valid UTF-8: %v), want at most %d ending in …", len(got), utf8.ValidString(got), maxHardwareDetail)
	}
}
