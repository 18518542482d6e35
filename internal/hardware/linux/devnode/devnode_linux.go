//go:build linux

package devnode

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Pin opens the node with O_PATH|O_NOFOLLOW and checks it is the expected
// character device; procRoot is where /proc is mounted, for the majors of
// dynamically numbered drivers (/proc in production).
func (n Node) Pin(procRoot string) (*Pinned, error) {
	fd, err := unix.Open(n.Path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: n.Path, Err: err}
	}
	f := os.NewFile(uintptr(fd), n.Path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "fstat", Path: n.Path, Err: err}
	}
	if err := n.check(st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), procRoot); err != nil {
		f.Close()
		return nil, err
	}
	return &Pinned{f: f}, nil
}

// Open pins the node and opens it with flag (unix.O_WRONLY, ...); O_NOCTTY
// and O_CLOEXEC are always added. Nothing is written by Open.
func (n Node) Open(flag int, procRoot string) (*os.File, error) {
	p, err := n.Pin(procRoot)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fd, err := unix.Open(p.ProcPath(), flag|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: n.Path, Err: err}
	}
	return os.NewFile(uintptr(fd), n.Path), nil
}
