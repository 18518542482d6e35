package bladectl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeblade/kubeblade/internal/doctor"
)

// TestDoctorLocalSocket asks a live agent over its socket; the OS comes
// from --host-root's os-release.
func TestDoctorLocalSocket(t *testing.T) {
	f := newFleet(t)
	root := t.TempDir()
	for path, text := range map[string]string{
		"etc/os-release":            "NAME=\"Talos\"\nID=talos\nPRETTY_NAME=\"Talos (v1.12.6)\"\n",
		"proc/sys/kernel/osrelease": "6.18.1-talos\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := f.run(t, "doctor", "--host-root", root)
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, s := range []string{"blade1: board unknown, OS talos (Talos (v1.12.6)), kernel 6.18.1-talos, fan unit standard, backend simulated",
		"the agent runs the simulated backend (a software blade): there is no hardware to change"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q:\n%s", s, r.stdout)
		}
	}

	r = f.run(t, "doctor", "--host-root", root, "--os", "raspios", "-o", "json")
	var out []result
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 || out[0].Doctor == nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	if d := out[0].Doctor; d.OS != doctor.OSRaspiOS || d.Backend != "simulated" || d.KernelRelease != "6.18.1-talos" {
		t.Errorf("report %+v", d)
	}

	if r := f.run(t, "doctor", "--os", "windows"); r.code != ExitUsage || !strings.Contains(r.stderr, `--os "windows": want talos or raspios`) {
		t.Errorf("bad --os: exit %d, %s", r.code, r.stderr)
	}
}

// TestDoctorUnreachable: no agent behind the socket is said plainly.
func TestDoctorUnreachable(t *testing.T) {
	f := newFleet(t)
	r := f.run(t, "--blade", "down", "doctor")
	want := "down: cannot reach agent at unix://" + f.downSocket + ": no such socket — is kubeblade-agent running? (doctor needs the agent's capability report"
	if r.code != ExitFailed || !strings.Contains(r.stderr, want) || r.stdout != "" {
		t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", r.code, r.stdout, r.stderr, want)
	}
	noLeaks(t, r)
}

// TestDoctorThroughCluster: with --node, the report comes from the Blade
// object and the OS from the Node, on a real API server.
func TestDoctorThroughCluster(t *testing.T) {
	k := newKube(t)
	n := k.node(t, "doc-cm4", nil, nil)
	n.Status.NodeInfo = corev1.NodeSystemInfo{OSImage: "Talos (v1.12.6)", KernelVersion: "6.18.1-talos",
		OperatingSystem: "linux", Architecture: "arm64"}
	if err := k.admin.Status().Update(testCtx(t), n); err != nil {
		t.Fatal(err)
	}
	st := healthy()
	st.SoC, st.FanUnit = "bcm2711", "standard"
	st.Capabilities = []string{"button", "poe-detect", "stealth", "tach", "temperature"}
	st.MissingCapabilities = []string{"fan", "leds"}
	// The agent's report says why (hardware/linux's Info.Detail).
	st.HardwareDetail = "devicetree compatible raspberrypi,4-compute-module; fan: none; " +
		"missing fan: no PWM chip drives GPIO12 (found none; set linux.pwmChip to choose one); leds: no LED class device named top or edge"
	k.blade(t, "doc-cm4", st)

	r := k.bladectl(t, "--node", "doc-cm4", "doctor")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, s := range []string{
		"doc-cm4: board cm4, OS talos (Talos (v1.12.6)), kernel 6.18.1-talos, fan unit standard, backend linux",
		"missing: fan, leds",
		"    overlay:\n      image: siderolabs/sbc-raspberrypi\n      name: rpi_generic\n      options:\n        configTxtAppend: |\n          dtoverlay=pwm,pin=12,func=4\n",
		"    machine:\n      install:\n        image: factory.talos.dev/installer/<schematic-id>:<talos-version>\n",
		"talosctl -n doc-cm4 ls /sys/class/pwm",
		"          - name: kubeblade-leds\n",
		"talosctl -n doc-cm4 ls /sys/class/leds",
		"\n== fan\nmissing fan: no PWM chip drives GPIO12 (found none; set linux.pwmChip to choose one)\n",
		"\n== leds\nmissing leds: no LED class device named top or edge\n",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q:\n%s", s, r.stdout)
		}
	}

	r = k.bladectl(t, "--node", "doc-cm4", "doctor", "-o", "json")
	var out []result
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 1 || out[0].Doctor == nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	d := out[0].Doctor
	if d.Board != doctor.BoardCM4 || d.OS != doctor.OSTalos || len(d.Fixes) != 2 ||
		d.Fixes[0].Capability != "fan" || d.Fixes[1].TalosPatch != doctor.Patch("kubeblade-leds") {
		t.Errorf("report %+v", d)
	}

	// A fan the agent can only switch on and off is not missing; only the
	// report's detail tells, and doctor reads it from the Blade too.
	n = k.node(t, "doc-cm5", nil, nil)
	n.Status.NodeInfo = corev1.NodeSystemInfo{OSImage: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.12.34+rpt-rpi-2712",
		OperatingSystem: "linux", Architecture: "arm64"}
	if err := k.admin.Status().Update(testCtx(t), n); err != nil {
		t.Fatal(err)
	}
	st = healthy()
	st.SoC, st.FanUnit = "bcm2712", "standard"
	st.Capabilities = []string{"button", "fan", "leds", "poe-detect", "stealth", "tach", "temperature"}
	st.HardwareDetail = "devicetree compatible raspberrypi,5-compute-module; fan: gpio-on-off (no PWM chip drives GPIO12 " +
		"(found pwmchip0 = 1f0009c000.pwm; set linux.pwmChip to choose one): not found)"
	k.blade(t, "doc-cm5", st)
	r = k.bladectl(t, "--node", "doc-cm5", "doctor")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, s := range []string{
		"doc-cm5: board cm5, OS raspios (Debian GNU/Linux 12 (bookworm)), kernel 6.12.34+rpt-rpi-2712, fan unit standard, backend linux",
		"1 change(s) below",
		"\n== fan\nthe fan is only switched on or off: fan: gpio-on-off (no PWM chip drives GPIO12",
		"add to /boot/firmware/config.txt:\n    dtoverlay=pwm,pin=12,func=4\n",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q:\n%s", s, r.stdout)
		}
	}

	// A Node without a Blade: no agent has reported there.
	k.node(t, "doc-none", nil, nil)
	r = k.bladectl(t, "--node", "doc-none", "doctor")
	if r.code != ExitFailed || !strings.Contains(r.stderr, "doc-none: ") || !strings.Contains(r.stderr, "doctor needs the agent's capability report") {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
}
