package nodeenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// portOwner names the process listening on a TCP port (", held by pid N
// (comm)"), read from /proc; empty when it cannot tell.
func portOwner(port int) string {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			local := fields[1]
			i := strings.LastIndexByte(local, ':')
			if p, err := strconv.ParseInt(local[i+1:], 16, 32); err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return ""
	}
	procs, _ := os.ReadDir("/proc")
	for _, pe := range procs {
		if _, err := strconv.Atoi(pe.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", pe.Name(), "fd"))
		for _, fd := range fds {
			target, _ := os.Readlink(filepath.Join("/proc", pe.Name(), "fd", fd.Name()))
			if inodes[target] {
				comm, _ := os.ReadFile(filepath.Join("/proc", pe.Name(), "comm"))
				return fmt.Sprintf(", held by pid %s (%s)", pe.Name(), strings.TrimSpace(string(comm)))
			}
		}
	}
	return ""
}
