//go:build unix

package statedir

import (
	"io/fs"
	"syscall"
)

func owner(info fs.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
