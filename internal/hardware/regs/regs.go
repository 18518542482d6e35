// Package regs reaches memory-mapped peripheral registers through /dev/mem
// for the bcm2711 and bcm2712 register backends (Raspberry Pi OS, where the
// kernel has no driver for the blade's WS2812 LEDs). Their logic is written
// against the small Block interface, so tests run it on an in-memory register
// file (regstest) that records every access.
package regs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// DefaultDevMem is the physical-memory device.
const DefaultDevMem = "/dev/mem"

// PageSize is the size every block is mapped with: one page holds each of
// the peripheral register blocks the backends use.
const PageSize = 4096

// Block is one mapped register block. Offsets are in bytes and must be
// 32-bit aligned; every access is a single 32-bit load or store, which is
// what the peripherals require.
type Block interface {
	Read(off uint32) uint32
	Write(off, v uint32)
}

// Mapper maps register blocks by physical address. name is used in errors
// and by test doubles to tell blocks apart.
type Mapper interface {
	Map(name string, phys int64, size int) (Block, error)
	Close() error
}

// ErrUnavailable wraps every failure to reach /dev/mem: it is missing
// (Talos, a container without the device), refused (not root, or a
// kernel with CONFIG_STRICT_DEVMEM and the region claimed by a driver), or
// cannot be mapped.
var ErrUnavailable = errors.New("/dev/mem unavailable")

// DevMem maps blocks of /dev/mem.
type DevMem struct {
	path string
	f    *os.File
	maps [][]byte
}

// OpenDevMem opens path (default /dev/mem) for reading and writing.
func OpenDevMem(path string) (*DevMem, error) {
	if path == "" {
		path = DefaultDevMem
	}
	// O_SYNC makes the kernel map the pages uncached, as device memory must be.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_SYNC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w%s", ErrUnavailable, err, hint(err))
	}
	return &DevMem{path: path, f: f}, nil
}

func hint(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return " (this kernel or container has no /dev/mem; Talos never has one: use the linux backend and the kubeblade-leds driver)"
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EPERM):
		return " (the register backends need root, or CAP_SYS_RAWIO in a privileged container)"
	}
	return ""
}

// Map maps size bytes at the physical address phys.
func (d *DevMem) Map(name string, phys int64, size int) (Block, error) {
	if size <= 0 || size%4 != 0 || phys%PageSize != 0 {
		return nil, fmt.Errorf("mapping %s: bad range %#x+%d", name, phys, size)
	}
	b, err := syscall.Mmap(int(d.f.Fd()), phys, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping %s at %#x from %s: %w%s", ErrUnavailable, name, phys, d.path, err, hint(err))
	}
	d.maps = append(d.maps, b)
	return &mapped{name: name, mem: unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)}, nil
}

// Close unmaps every block and closes the device.
func (d *DevMem) Close() error {
	var errs []error
	for _, b := range d.maps {
		errs = append(errs, syscall.Munmap(b))
	}
	d.maps = nil
	errs = append(errs, d.f.Close())
	return errors.Join(errs...)
}

type mapped struct {
	name string
	mem  []uint32
}

// Atomic loads and stores are single 32-bit accesses the compiler can
// neither merge, split nor drop: the volatile access device registers need.
func (m *mapped) Read(off uint32) uint32 { return atomic.LoadUint32(&m.mem[m.index(off)]) }
func (m *mapped) Write(off, v uint32)    { atomic.StoreUint32(&m.mem[m.index(off)], v) }

func (m *mapped) index(off uint32) int {
	if off%4 != 0 || int(off/4) >= len(m.mem) {
		// A programming error in a backend, never input: crash loudly
		// rather than touch a neighbouring register.
		panic(fmt.Sprintf("regs: %s: offset %#x outside the block or unaligned", m.name, off))
	}
	return int(off / 4)
}

// Usable reports whether path can be opened and the page at phys mapped,
// without touching any register: what `auto` asks before choosing a
// register backend.
func Usable(path string, phys int64) error {
	d, err := OpenDevMem(path)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.Map("probe", phys, PageSize)
	return err
}

// IsTalos reports whether the kernel command line (procRoot/cmdline) is a
// Talos Linux one. Talos has no /dev/mem, so a register backend can never
// work there; this makes the refusal explicit rather than incidental.
func IsTalos(procRoot string) bool {
	b, err := os.ReadFile(procRoot + "/cmdline")
	return err == nil && strings.Contains(string(b), "talos.platform=")
}

// PollLimit bounds every busy-wait of the register drivers.
const PollLimit = 10_000

// Poll calls done until it reports true, pausing between calls, at most
// PollLimit times: a peripheral that never answers is an error, not a hang.
func Poll(sleep func(time.Duration), what string, done func() bool) error {
	for i := 0; i < PollLimit; i++ {
		if done() {
			return nil
		}
		sleep(time.Microsecond)
	}
	return fmt.Errorf("%s: no answer after %d polls", what, PollLimit)
}
