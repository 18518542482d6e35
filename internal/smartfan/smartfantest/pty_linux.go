//go:build linux

package smartfantest

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

// OpenPTY returns a pseudo-terminal pair: the master, where the simulated
// fan unit sits, and the slave's path, which the client opens as a real tty
// through go.bug.st/serial. A slave descriptor is held open (in raw mode)
// for the test's lifetime so the master does not see a hang-up while the
// client reconnects.
func OpenPTY(t testing.TB) (*os.File, string) {
	t.Helper()
	return openPTY(t, "/dev/ptmx")
}

// openPTY is OpenPTY with the multiplexer's path given, so a test can name
// one that is missing.
func openPTY(t testing.TB, ptmx string) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open(ptmx, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		// The smart fan unit's tests (its firmware model, the UART
		// client, the linux backend's and the reliability suite's)
		// need a real tty: without one they test nothing.
		testreq.Unavailable(t, "no pseudo-terminal for the smart fan unit's UART: %v", err)
		return nil, ""
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		t.Fatalf("ptsname: %v", err)
	}
	// Non-blocking, so the runtime poller can interrupt reads on Close.
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	master := os.NewFile(uintptr(fd), "ptmx")
	path := fmt.Sprintf("/dev/pts/%d", n)

	sfd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open %s: %v", path, err)
	}
	tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	// cfmakeraw: no echo, no line editing, no CR/LF translation — a UART.
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag &^= unix.CSIZE | unix.PARENB
	tio.Cflag |= unix.CS8
	if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		master.Close()
		unix.Close(sfd)
	})
	return master, path
}
