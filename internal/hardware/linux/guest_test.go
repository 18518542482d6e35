//go:build !guest

package linux_test

import (
	"testing"

	"github.com/kubeblade/kubeblade/internal/guest"
)

// TestGuestKernel boots the rig's kernel with this package's in-guest tests
// (kernel_guest_test.go) as init: a plain `go test` skips it with a reason,
// make hwtest (KUBEBLADE_GUEST_KERNEL, KUBEBLADE_TEST_REQUIRED=1) runs it.
func TestGuestKernel(t *testing.T) {
	guest.RunPackage(t, guest.Package{
		Dir: ".",
		Run: "^TestKernel",
		// A non-sleeping GPIO chip for pwm-gpio (see pwmGPIO).
		Cmdline: []string{"gpio_mockup.gpio_mockup_ranges=-1,32", "gpio_mockup.gpio_mockup_named_lines=1"},
	})
}
