package logging

import (
	"bytes"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown"`) {
		t.Fatalf("output %q", out)
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := New(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("New(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
