package backends

import (
	"context"
	"testing"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// TestAutoIsLinuxEvenOffBlade: auto never silently simulates; a machine
// that is not a blade gets the linux backend saying so.
func TestAutoIsLinuxEvenOffBlade(t *testing.T) {
	root := t.TempDir()
	for _, backend := range []v1alpha1.HardwareBackend{v1alpha1.BackendAuto, "", v1alpha1.BackendLinux} {
		o, err := Open(context.Background(), v1alpha1.HardwareConfig{
			Backend: backend,
			Linux:   v1alpha1.LinuxHardwareConfig{SysfsRoot: root, DevRoot: root, ProcRoot: root},
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
