// Package regstest is an in-memory register file for testing the register
// backends: it records every read, write and pause in order, and lets a test
// model how the peripheral reacts (a FIFO that drains, a busy bit that
// clears, a password that must accompany a write) with per-block hooks.
package regstest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kubeblade/kubeblade/internal/hardware/regs"
)

// Kind is what an Access did.
type Kind int

const (
	Read Kind = iota
	Write
	Pause
)

// Access is one recorded access. For a Pause only Pause is set.
type Access struct {
	Kind  Kind
	Block string
	Off   uint32
	Val   uint32
	Pause time.Duration
}

func (a Access) String() string {
	switch a.Kind {
	case Read:
		return fmt.Sprintf("R %s+%#03x = %#08x", a.Block, a.Off, a.Val)
	case Write:
		return fmt.Sprintf("W %s+%#03x = %#08x", a.Block, a.Off, a.Val)
	}
	return fmt.Sprintf("pause %v", a.Pause)
}

// Model makes a block behave like its peripheral. Both hooks are optional.
type Model struct {
	// OnRead returns what a read of off yields given the stored value.
	OnRead func(off, stored uint32) uint32
	// OnWrite returns the value stored by a write of v to off (what the
	// next plain read returns) and whether to store it at all.
	OnWrite func(off, v uint32) (store uint32, ok bool)
}

// File is a set of register blocks in memory. It implements regs.Mapper.
type File struct {
	mu     sync.Mutex
	blocks map[string]*block
	byAddr map[int64]string
	models map[string]Model
	log    []Access
	closed bool
	// MapErr, when set, fails every Map: /dev/mem refused.
	MapErr error
}

var _ regs.Mapper = (*File)(nil)

// New returns an empty register file.
func New() *File {
	return &File{blocks: map[string]*block{}, byAddr: map[int64]string{}, models: map[string]Model{}}
}

// SetModel installs a model for the block called name (before or after
// it is mapped).
func (f *File) SetModel(name string, m Model) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.models[name] = m
}

// Map implements regs.Mapper. Mapping the same address twice returns the
// same registers, like /dev/mem.
func (f *File) Map(name string, phys int64, size int) (regs.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.MapErr != nil {
		return nil, f.MapErr
	}
	if prev, ok := f.byAddr[phys]; ok && prev != name {
		return nil, fmt.Errorf("regstest: %#x mapped as %s and %s", phys, prev, name)
	}
	b, ok := f.blocks[name]
	if !ok {
		b = &block{f: f, name: name, phys: phys, mem: make([]uint32, size/4)}
		f.blocks[name] = b
		f.byAddr[phys] = name
	}
	return b, nil
}

// Close implements regs.Mapper.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Closed reports whether Close was called.
func (f *File) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// Phys returns the physical address the block called name was mapped at.
func (f *File) Phys(name string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blocks[name]
	if !ok {
		return 0, false
	}
	return b.phys, true
}

// Sleep records a pause; backends take it as their sleep function.
func (f *File) Sleep(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, Access{Kind: Pause, Pause: d})
}

// Peek returns a register's stored value without recording an access.
func (f *File) Peek(name string, off uint32) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.blocks[name]
	if b == nil {
		return 0
	}
	return b.mem[off/4]
}

// Poke sets a register's stored value without recording an access.
func (f *File) Poke(name string, off, v uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.blocks[name]
	if b == nil {
		panic("regstest: poke of unmapped block " + name)
	}
	b.mem[off/4] = v
}

// Log returns every access so far, in order.
func (f *File) Log() []Access {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Access(nil), f.log...)
}

// Reset forgets the log (not the register contents).
func (f *File) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = nil
}

// Writes returns the writes to one register, in order.
func (f *File) Writes(name string, off uint32) []uint32 {
	var out []uint32
	for _, a := range f.Log() {
		if a.Kind == Write && a.Block == name && a.Off == off {
			out = append(out, a.Val)
		}
	}
	return out
}

// Dump formats the log, one access a line, for failure messages.
func Dump(log []Access) string {
	var b strings.Builder
	for i, a := range log {
		fmt.Fprintf(&b, "%4d %s\n", i, a)
	}
	return b.String()
}

type block struct {
	f    *File
	name string
	phys int64
	mem  []uint32
}

func (b *block) check(off uint32) {
	if off%4 != 0 || int(off/4) >= len(b.mem) {
		panic(fmt.Sprintf("regstest: %s: offset %#x outside the block or unaligned", b.name, off))
	}
}

// Read and Write call the model without the lock held, so a model may use
// Peek and Poke on other blocks (a clock that changes what the PWM does).
func (b *block) Read(off uint32) uint32 {
	b.check(off)
	b.f.mu.Lock()
	stored := b.mem[off/4]
	m := b.f.models[b.name]
	b.f.mu.Unlock()
	v := stored
	if m.OnRead != nil {
		v = m.OnRead(off, stored)
	}
	b.f.mu.Lock()
	b.f.log = append(b.f.log, Access{Kind: Read, Block: b.name, Off: off, Val: v})
	b.f.mu.Unlock()
	return v
}

func (b *block) Write(off, v uint32) {
	b.check(off)
	b.f.mu.Lock()
	m := b.f.models[b.name]
	b.f.log = append(b.f.log, Access{Kind: Write, Block: b.name, Off: off, Val: v})
	b.f.mu.Unlock()
	store, ok := v, true
	if m.OnWrite != nil {
		store, ok = m.OnWrite(off, v)
	}
	if ok {
		b.f.mu.Lock()
		b.mem[off/4] = store
		b.f.mu.Unlock()
	}
}
