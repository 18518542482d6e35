// Package migrate translates compute-blade-agent's files into kubeblade's
// and back: the old agent's config.yaml into an agent.yaml or a BladeConfig,
// and the old bladectl's config into bladectl's file of named blades (and
// back again, for the old bladectl). It reads and writes bytes only; the
// commands that use it decide where they come from and go.
//
// The schemas are the old projects' own, read from their source:
//
//   - github.com/compute-blade-community/compute-blade-agent at
//     422cf18555ed2a7be290de6d82e7246209f73fb6: pkg/agent/config.go,
//     pkg/fancontroller/{config,fancontroller}.go, pkg/hal/config.go,
//     pkg/hal/led/types.go, internal/agent/{agent,api,options}.go,
//     cmd/agent/{main.go,default-config.yaml} for the agent;
//     cmd/bladectl/config/config.go and cmd/bladectl/cmd_root.go for bladectl.
//   - github.com/uptime-industries/compute-blade-agent at
//     485f5ac79b370a690c7c7edfe31d8be4326e476c (its predecessor, config in
//     /etc/computeblade-agent): internal/agent/agent.go, cmd/agent/main.go.
//
// Both read their files with viper, so keys match case-insensitively and
// scalars are converted weakly ("60" is a number, 1 is true); this package
// does the same, and says where it cannot.
package migrate

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Finding is one thing said about an input file: a warning, or a reason
// it cannot be translated. Line is 1-based; 0 when the finding is about
// the file as a whole.
type Finding struct {
	File    string
	Line    int
	Key     string
	Message string
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.File)
	if f.Line > 0 {
		fmt.Fprintf(&b, ":%d", f.Line)
	}
	b.WriteString(": ")
	if f.Key != "" {
		b.WriteString(f.Key)
		b.WriteString(": ")
	}
	b.WriteString(f.Message)
	return b.String()
}

// Error lists every reason an input cannot be translated. Nothing is
// written when a translation returns one.
type Error struct{ Findings []Finding }

func (e *Error) Error() string {
	lines := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// findings collects warnings and errors while walking a file.
type findings struct {
	file           string
	warnings, errs []Finding
}

func (f *findings) warn(line int, key, format string, args ...any) {
	f.warnings = append(f.warnings, Finding{File: f.file, Line: line, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (f *findings) fail(line int, key, format string, args ...any) {
	f.errs = append(f.errs, Finding{File: f.file, Line: line, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (f *findings) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	sort.SliceStable(f.errs, func(i, j int) bool { return f.errs[i].Line < f.errs[j].Line })
	return &Error{Findings: f.errs}
}

// AsError returns the findings of err when it is an *Error.
func AsError(err error) ([]Finding, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Findings, true
	}
	return nil, false
}
