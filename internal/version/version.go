// Package version reports the build's version, commit and date. Release
// builds stamp them at link time (the Makefile's -X ldflags); a plain
// `go build` in a git checkout or a `go install module@version` reports
// what the Go toolchain recorded in the module's build info instead.
package version

import (
	"regexp"
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

// Dev is the version of a build that knows nothing about itself.
const Dev = "v0.0.0-dev"

// Info is the build's identity.
type Info struct {
	Version string
	Commit  string
	Date    time.Time
}

// Get returns the build's identity: the stamped values, with gaps filled
// from the Go build info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(version, commit, date, bi)
}

// pseudo matches the tail of a Go pseudo-version (vX.0.0-yyyymmddhhmmss-
// abcdefabcdef, vX.Y.Z-pre.0.yyyymmddhhmmss-…, vX.Y.Z-0.yyyymmddhhmmss-…),
// with the +dirty or +incompatible suffix the toolchain may add.
var pseudo = regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(\+[0-9A-Za-z.-]+)?$`)

// fromBuild fills the stamped values' gaps from bi, which has:
//   - for `go build` in a git checkout (Go 1.24 and later, -buildvcs not
//     false): Main.Version from the tag or a pseudo-version with +dirty
//     for uncommitted changes, and vcs.revision, vcs.time, vcs.modified;
//   - for `go install module@version`: Main.Version only (a release tag,
//     or a pseudo-version that itself names the commit and its time).
func fromBuild(stampedVersion, stampedCommit, stampedDate string, bi *debug.BuildInfo) Info {
	i := Info{Version: stampedVersion, Commit: stampedCommit}
	if s, err := strconv.ParseInt(stampedDate, 10, 64); err == nil {
		i.Date = time.Unix(s, 0).UTC()
	}
	if bi != nil {
		mv := bi.Main.Version
		if mv == "(devel)" {
			mv = ""
		}
		if i.Version == "" {
			i.Version = mv
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
		if m := pseudo.FindStringSubmatch(mv); m != nil && mv == i.Version {
			if i.Commit == "" {
				i.Commit = m[2]
			}
			if i.Date.IsZero() {
				i.Date, _ = time.Parse("20060102150405", m[1])
			}
		}
	}
	if i.Version == "" {
		i.Version = Dev
	}
	return i
}

// String is "version (commit, date)", leaving out what is unknown.
func (i Info) String() string {
	var extra []string
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		extra = append(extra, c)
	}
	if !i.Date.IsZero() {
		extra = append(extra, i.Date.UTC().Format(time.RFC3339))
	}
	switch len(extra) {
	case 0:
		return i.Version
	case 1:
		return i.Version + " (" + extra[0] + ")"
	}
	return i.Version + " (" + extra[0] + ", " + extra[1] + ")"
}
