// Package version reports the build's version, commit and date. The values
// are stamped at link time by the Makefile (-X ldflags); a plain `go build`
// reports what the Go toolchain recorded about the module and VCS.
package version

import (
	"runtime/debug"
	"strconv"
	"time"
)

// Stamped by -ldflags "-X github.com/kubeblade/kubeblade/internal/version.version=...".
// They are link-time constants in all but name: nothing assigns them at run time.
var (
	version = ""
	commit  = ""
	date    = "" // Unix seconds
)

// Info is the build's identity.
type Info struct {
	Version string
	Commit  string
	Date    time.Time
}

// Get returns the build's identity, filling gaps from the Go build info.
func Get() Info {
	i := Info{Version: version, Commit: commit}
	if s, err := strconv.ParseInt(date, 10, 64); err == nil {
		i.Date = time.Unix(s, 0).UTC()
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Commit == "" {
					i.Commit = s.Value
				}
			case "vcs.time":
				if i.Date.IsZero() {
					i.Date, _ = time.Parse(time.RFC3339, s.Value)
				}
			}
		}
	}
	if i.Version == "" {
		i.Version = "v0.0.0-dev"
	}
	return i
}

// String is "version (commit)".
func (i Info) String() string {
	if i.Commit == "" {
		return i.Version
	}
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	return i.Version + " (" + c + ")"
}
