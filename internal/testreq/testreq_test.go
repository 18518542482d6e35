package testreq

import (
	"testing"
)

// recorder captures what Unavailable does without ending the real test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skip(args ...any)                  { r.skipped = true; r.msg = args[0].(string) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = true; r.msg = format }

func TestUnavailable(t *testing.T) {
	for name, tc := range map[string]struct {
		env          string
		skip, failed bool
	}{
		"plain go test skips":     {skip: true},
		"make test fails":         {env: "1", failed: true},
		"other values still skip": {env: "yes", skip: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(Env, tc.env)
			r := &recorder{}
			Unavailable(r, "no %s here", "kernel")
			if r.skipped != tc.skip || r.failed != tc.failed {
				t.Fatalf("skipped=%v failed=%v, want skipped=%v failed=%v (%s)", r.skipped, r.failed, tc.skip, tc.failed, r.msg)
			}
			r = &recorder{}
			Need(r, true, "never")
			if r.skipped || r.failed {
				t.Fatal("Need(ok) ended the test")
			}
		})
	}
}
