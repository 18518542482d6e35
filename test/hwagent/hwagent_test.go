//go:build !guest

package hwagent_test

import (
	"debug/elf"
	"os"
	"testing"

	"github.com/kubeblade/kubeblade/internal/guest"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// TestGuestAgent boots each scenario's guest with the agent binary named
// by KUBEBLADE_GUEST_AGENT, the kubeblade-leds modules, and the in-guest
// tests (agent_guest_test.go) as init.
func TestGuestAgent(t *testing.T) {
	k := guest.RequireKernel(t)
	agent := os.Getenv(guest.EnvAgent)
	testreq.Need(t, agent != "", "%s is not set (make hwtest and hwtest-arm64 read the agent out of the image and set it)", guest.EnvAgent)
	f, err := elf.Open(agent)
	if err != nil {
		t.Fatalf("%s: %v", agent, err)
	}
	machine := f.Machine
	f.Close()
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[k.Machine.GOARCH]; machine != want {
		t.Fatalf("%s is built for %s, the guest is %s", agent, machine, k.Machine.Arch)
	}
	files := append(guest.Modules(t, k, "../.."), guest.File{Path: agentPath, Source: agent, Mode: 0o755})
	guest.RunPackage(t, guest.Package{Dir: ".", Run: "^TestAgent", Files: files})
}
