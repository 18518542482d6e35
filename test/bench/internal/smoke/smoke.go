// Package smoke is what the benchmark programs' smoke tests share: they run a
// harness once at a small size, capture what it prints and check that its
// result line is still there, so a harness cannot rot between benchmark runs.
package smoke

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// Stdout runs fn with os.Stdout sent to a pipe and returns what it printed.
// fn's error fails the test, with the output beside it.
func Stdout(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	err = fn()
	os.Stdout = old
	w.Close()
	<-done
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, buf.String())
	}
	return buf.String()
}

// ResultLine returns the last line of out that starts with prefix and fails
// the test if there is none or if it lacks any of keys.
func ResultLine(t *testing.T, out, prefix string, keys ...string) string {
	t.Helper()
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no %q line in the output:\n%s", strings.TrimSpace(prefix), out)
	}
	for _, k := range keys {
		if !strings.Contains(line, k) {
			t.Errorf("%s lacks %q: %s", strings.TrimSpace(prefix), k, line)
		}
	}
	return line
}
