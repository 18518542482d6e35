package backends

import (
	"context"
	"testing"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
)

// TestAutoIsLinuxEvenOffBlade: auto never silently simulates; a machine
// that is not a blade gets the linux backend saying so.
func TestAutoIsLinuxEvenOffBlade(t *testing.T) {
	root := t.TempDir()
	for _, backend := range []agentconfigv1.HardwareBackend{agentconfigv1.BackendAuto, "", agentconfigv1.BackendLinux} {
		o, err := Open(context.Background(), agentconfigv1.HardwareConfig{
			Backend: backend,
			Linux:   agentconfigv1.LinuxHardwareConfig{SysfsRoot: root, DevRoot: root, ProcRoot: root},
		}, Deps{})
		if err != nil {
			t.Fatalf("%q: %v", backend, err)
		}
		info := o.Backend.Info()
		if o.Simulated != nil || info.Backend != "linux" || info.IsBlade {
			t.Fatalf("%q: got %+v (simulated %v)", backend, info, o.Simulated != nil)
		}
		if err := o.Backend.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
