//go:build linux

// Package guestinit turns a Go test binary into the init of a guest kernel
// (package guest boots it): it mounts what tests need, runs the tests with
// a watchdog, counts their results, prints the closing "N passed, M failed"
// line on the console and powers the machine off.
//
// Use it from a TestMain in a file with the guest build tag:
//
//	func TestMain(m *testing.M) { guestinit.Main(m) }
//
// Outside a guest (not PID 1) Main just runs the tests.
package guestinit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultWatchdog bounds the tests when the host gives no watchdog.
const DefaultWatchdog = 3 * time.Minute

// Mounts are the file systems a guest's tests find mounted.
var Mounts = []struct{ Source, Target, FSType string }{
	{"proc", "/proc", "proc"},
	{"sysfs", "/sys", "sysfs"},
	{"devtmpfs", "/dev", "devtmpfs"},
	{"devpts", "/dev/pts", "devpts"},
	{"tmpfs", "/tmp", "tmpfs"},
	{"tmpfs", "/run", "tmpfs"},
	{"configfs", "/sys/kernel/config", "configfs"},
	{"debugfs", "/sys/kernel/debug", "debugfs"},
}

// Main runs m. As PID 1 it prepares the guest first and never returns:
// it powers the machine off.
func Main(m *testing.M) {
	if os.Getpid() != 1 {
		os.Exit(m.Run())
	}
	console := os.Stdout
	if err := mountAll(); err != nil {
		fmt.Fprintf(console, "guestinit: %v\n0 passed, 1 failed\n", err)
		powerOff()
	}
	watchdog := DefaultWatchdog
	if d, err := time.ParseDuration(os.Getenv("KUBEBLADE_GUEST_WATCHDOG")); err == nil && d > 0 {
		watchdog = d
	}
	// The tests' output goes through a pipe so the results can be
	// counted on their way to the console.
	counts, restore, err := countOutput(console)
	if err != nil {
		fmt.Fprintf(console, "guestinit: %v\n0 passed, 1 failed\n", err)
		powerOff()
	}
	var once sync.Once
	finish := func(extraFailed int, note string) {
		once.Do(func() {
			c := restore()
			if note != "" {
				fmt.Fprintf(console, "guestinit: %s\n", note)
			}
			fmt.Fprintf(console, "guestinit: %d skipped\n", c.skipped)
			fmt.Fprintf(console, "\n%d passed, %d failed\n", c.passed, c.failed+extraFailed)
			powerOff()
		})
	}
	time.AfterFunc(watchdog, func() {
		finish(1, fmt.Sprintf("watchdog: the tests did not finish within %s", watchdog))
	})
	code := m.Run()
	extra := 0
	if code != 0 && counts().failed == 0 {
		// A failure outside any test (TestMain, a panic caught by
		// the runner, a bad flag) still fails the run.
		extra = 1
	}
	finish(extra, fmt.Sprintf("tests exited with code %d", code))
}

func mountAll() error {
	for _, mt := range Mounts {
		if err := os.MkdirAll(mt.Target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(mt.Source, mt.Target, mt.FSType, 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", mt.FSType, mt.Target, err)
		}
	}
	return nil
}

func powerOff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reboot only returns on failure; PID 1 must not exit.
	select {}
}

type tally struct{ passed, failed, skipped int }

// Result lines of `go test -v`, for tests and subtests alike.
var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): `)

// countOutput redirects fds 1 and 2 into a pipe whose lines are copied to
// console and counted. restore puts the console back, waits for the copy
// to drain and returns the final counts.
func countOutput(console *os.File) (counts func() tally, restore func() tally, err error) {
	saved, err := unix.Dup(int(console.Fd()))
	if err != nil {
		return nil, nil, err
	}
	out := os.NewFile(uintptr(saved), "console")
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(w.Fd()), fd); err != nil {
			return nil, nil, err
		}
	}
	var mu sync.Mutex
	var t tally
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				io.WriteString(out, line)
				if m := resultLine.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
					mu.Lock()
					switch m[1] {
					case "PASS":
						t.passed++
					case "FAIL":
						t.failed++
					case "SKIP":
						t.skipped++
					}
					mu.Unlock()
				}
			}
			if err != nil {
				return
			}
		}
	}()
	counts = func() tally {
		mu.Lock()
		defer mu.Unlock()
		return t
	}
	restore = func() tally {
		for _, fd := range []int{1, 2} {
			_ = unix.Dup2(saved, fd)
		}
		w.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		return counts()
	}
	return counts, restore, nil
}
