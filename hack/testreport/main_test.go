package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kubeblade/kubeblade/internal/testreq"
)

// stream renders test2json events, one a line, as go test -json writes
// them: {action, package, test, output}.
func stream(t *testing.T, events ...[4]string) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(event{Action: e[0], Package: e[1], Test: e[2], Output: e[3]})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// prerequisiteSkip is the reason testreq.Unavailable gives in a plain run,
// taken from testreq itself so the marker testreport looks for cannot drift
// from the text tests print.
func prerequisiteSkip(t *testing.T, reason string) string {
	t.Helper()
	t.Setenv(testreq.Env, "")
	tb := &recordingTB{}
	testreq.Unavailable(tb, "%s", reason)
	if tb.skipped == "" {
		t.Fatal("testreq.Unavailable did not skip outside required mode")
	}
	return tb.skipped
}

// recordingTB records the Skip testreq makes instead of ending a test.
type recordingTB struct {
	testing.TB
	skipped string
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Skip(args ...any) { r.skipped = fmt.Sprint(args...) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	panic("testreq failed the test outside required mode: " + fmt.Sprintf(format, args...))
}

func TestPrerequisiteMarkerIsWhatTestreqPrints(t *testing.T) {
	if got := prerequisiteSkip(t, "no control plane"); !strings.HasPrefix(got, prerequisiteMarker) {
		t.Fatalf("testreq skips with %q, which does not start with testreport's marker %q", got, prerequisiteMarker)
	}
}

var allowSuite = gocmp.Options{gocmp.AllowUnexported(suite{}), cmpopts.EquateEmpty()}

func TestParseTest2JSON(t *testing.T) {
	prereq := prerequisiteSkip(t, "no control plane")
	for name, tc := range map[string]struct {
		in   string
		want suite
	}{
		"a passing suite": {
			in: stream(t,
				[4]string{"run", "p/a", "TestOne", ""},
				[4]string{"output", "p/a", "TestOne", "=== RUN   TestOne\n"},
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"run", "p/b", "TestTwo", ""},
				[4]string{"pass", "p/b", "TestTwo", ""},
				[4]string{"pass", "p/a", "", ""},
				[4]string{"pass", "p/b", "", ""},
			),
			want: suite{passed: 2},
		},
		"a failed test": {
			in: stream(t,
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"output", "p/a", "TestBad", "    a_test.go:9: boom\n"},
				[4]string{"fail", "p/a", "TestBad", ""},
				[4]string{"fail", "p/a", "", ""},
			),
			want: suite{passed: 1, failed: 1, failures: []string{"p/a TestBad"}},
		},
		"a prerequisite skip next to a passing test": {
			in: stream(t,
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"output", "p/a", "TestEnv", "=== RUN   TestEnv\n"},
				[4]string{"output", "p/a", "TestEnv", "    env_test.go:20: " + prereq + "\n"},
				[4]string{"output", "p/a", "TestEnv", "--- SKIP: TestEnv (0.00s)\n"},
				[4]string{"skip", "p/a", "TestEnv", ""},
			),
			want: suite{passed: 1, skipped: 1, skips: map[string]string{"p/a TestEnv": "env_test.go:20: " + prereq}},
		},
		"a package whose every test skipped": {
			in: stream(t,
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"output", "p/b", "TestShort", "    b_test.go:5: -short\n"},
				[4]string{"skip", "p/b", "TestShort", ""},
				[4]string{"skip", "p/b", "TestQuiet", ""},
				[4]string{"skip", "p/b", "", ""},
			),
			want: suite{passed: 1, skipped: 2, allSkipped: []string{"p/b"},
				skips: map[string]string{"p/b TestShort": "b_test.go:5: -short", "p/b TestQuiet": ""}},
		},
		"a suite that ran nothing": {
			in:   "",
			want: suite{},
		},
		"package-level results and build output are not tests, and a package failed outside its tests": {
			in: "# p/c\nc.go:1: syntax error\n" + stream(t,
				[4]string{"output", "p/c", "", "FAIL\tp/c [build failed]\n"},
				[4]string{"fail", "p/c", "", ""},
				[4]string{"skip", "p/d", "", ""},
			),
			want: suite{failedPackages: map[string]string{"p/c": "[build failed]"}},
		},
		"a package that failed with a failed test did not fail outside it": {
			in: stream(t,
				[4]string{"run", "p/a", "TestBad", ""},
				[4]string{"fail", "p/a", "TestBad", ""},
				[4]string{"output", "p/a", "", "FAIL\tp/a\t0.1s\n"},
				[4]string{"fail", "p/a", "", ""},
			),
			want: suite{failed: 1, failures: []string{"p/a TestBad"}},
		},
		"a test still running when the stream ended failed": {
			in: stream(t,
				[4]string{"run", "p/a", "TestOne", ""},
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"run", "p/a", "TestLong", ""},
				[4]string{"output", "p/a", "TestLong", "=== RUN   TestLong\n"},
			),
			want: suite{passed: 1, failed: 1, failures: []string{"p/a TestLong"},
				unfinished: map[string]string{"p/a TestLong": "no result: the stream ended before its package's result (go test did not finish)"}},
		},
		"a package whose stream ended before its result failed": {
			in: stream(t,
				[4]string{"start", "p/a", "", ""},
				[4]string{"run", "p/a", "TestOne", ""},
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"run", "p/a", "BenchmarkLong", ""},
				[4]string{"output", "p/a", "BenchmarkLong", "BenchmarkLong\n"},
			),
			want: suite{passed: 1, failedPackages: map[string]string{"p/a": "no result: the stream ended before its package's result (go test did not finish)"}},
		},
		"a test that ran again with -count and ended each time": {
			in: stream(t,
				[4]string{"run", "p/a", "TestOne", ""},
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"run", "p/a", "TestOne", ""},
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"pass", "p/a", "", ""},
			),
			want: suite{passed: 2},
		},
		"a parent whose subtests all skipped is skipped, not passed": {
			in: stream(t,
				[4]string{"pass", "p/a", "TestOne", ""},
				[4]string{"output", "p/a", "TestFlows/x", "    e_test.go:9: no cluster\n"},
				[4]string{"skip", "p/a", "TestFlows/x", ""},
				[4]string{"skip", "p/a", "TestFlows/y", ""},
				[4]string{"output", "p/a", "TestFlows", "=== RUN   TestFlows\n"},
				[4]string{"output", "p/a", "TestFlows", "--- PASS: TestFlows (0.00s)\n"},
				[4]string{"pass", "p/a", "TestFlows", ""},
			),
			want: suite{passed: 1, skipped: 3, skippedParents: []string{"p/a TestFlows (2 subtests)"},
				skips: map[string]string{"p/a TestFlows/x": "e_test.go:9: no cluster", "p/a TestFlows/y": "",
					"p/a TestFlows": "every one of its 2 subtests skipped"}},
		},
		"skips nest: a parent of skipped parents is skipped, and so is its package": {
			in: stream(t,
				[4]string{"skip", "p/g", "TestGuest/TestKernelA/one", ""},
				[4]string{"pass", "p/g", "TestGuest/TestKernelA", ""},
				[4]string{"skip", "p/g", "TestGuest/TestKernelB", ""},
				[4]string{"pass", "p/g", "TestGuest", ""},
				[4]string{"pass", "p/g", "", ""},
			),
			want: suite{skipped: 4, allSkipped: []string{"p/g"},
				skippedParents: []string{"p/g TestGuest/TestKernelA (1 subtests)", "p/g TestGuest (2 subtests)"},
				skips: map[string]string{"p/g TestGuest/TestKernelA/one": "", "p/g TestGuest/TestKernelB": "",
					"p/g TestGuest/TestKernelA": "every one of its 1 subtests skipped", "p/g TestGuest": "every one of its 2 subtests skipped"}},
		},
		"a parent with one subtest that ran passes": {
			in: stream(t,
				[4]string{"skip", "p/a", "TestT/one", ""},
				[4]string{"pass", "p/a", "TestT/two", ""},
				[4]string{"pass", "p/a", "TestT", ""},
			),
			want: suite{passed: 2, skipped: 1, skips: map[string]string{"p/a TestT/one": ""}},
		},
		"a parent that failed beside skipped subtests failed": {
			in: stream(t,
				[4]string{"skip", "p/a", "TestT/one", ""},
				[4]string{"output", "p/a", "TestT", "    t_test.go:3: setup broke\n"},
				[4]string{"fail", "p/a", "TestT", ""},
			),
			want: suite{failed: 1, skipped: 1, failures: []string{"p/a TestT"}, skips: map[string]string{"p/a TestT/one": ""}},
		},
		"a subtest counts as a test of its own": {
			in: stream(t,
				[4]string{"pass", "p/a", "TestT/one", ""},
				[4]string{"fail", "p/a", "TestT/two", ""},
				[4]string{"fail", "p/a", "TestT", ""},
			),
			want: suite{passed: 1, failed: 2, failures: []string{"p/a TestT/two", "p/a TestT"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseTest2JSON(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(&tc.want, got, allowSuite); diff != "" {
				t.Errorf("suite (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSteps(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []*step
	}{
		"passing and failed steps": {
			in:   "vet\t5.2\t0\nunit\t100.4\t1\n",
			want: []*step{{name: "vet", seconds: 5.2}, {name: "unit", seconds: 100.4, status: 1}},
		},
		"lines of another shape are not steps": {
			in:   "\nvet 5.2 0\nunit\t1\t0\textra\ne2e\t3\t2\n",
			want: []*step{{name: "e2e", seconds: 3, status: 2}},
		},
		"no steps": {in: "", want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseSteps(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.want, got, gocmp.AllowUnexported(step{})); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCounts(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    *suite
		wantErr string
	}{
		"all three":         {in: "passed=10 failed=1 skipped=2\n", want: &suite{passed: 10, failed: 1, skipped: 2}},
		"in any order":      {in: "skipped=0\npassed=3", want: &suite{passed: 3}},
		"empty":             {in: "", want: &suite{}},
		"not a number":      {in: "passed=many", wantErr: `kunit.counts: "passed=many" is not key=number`},
		"not key=number":    {in: "passed", wantErr: `kunit.counts: "passed" is not key=number`},
		"an unknown result": {in: "passed=1 flaky=2", wantErr: `kunit.counts: unknown key "flaky"`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseCounts("kunit", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.want, got, allowSuite); diff != "" {
				t.Errorf("suite (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	prereq := prerequisiteSkip(t, "no control plane")
	for name, tc := range map[string]struct {
		steps []*step
		want  []string
	}{
		"a passing run": {
			steps: []*step{
				{name: "vet", seconds: 5},
				{name: "unit", seconds: 60, suite: &suite{passed: 3, skipped: 1, skips: map[string]string{"p/a TestShort": "-short"}}},
			},
		},
		"a failed step": {
			steps: []*step{{name: "vet", seconds: 5, status: 2}},
			want:  []string{"step vet exited with status 2"},
		},
		"a failed test": {
			steps: []*step{{name: "unit", status: 1, suite: &suite{passed: 1, failed: 1, failures: []string{"p/a TestBad"}}}},
			want:  []string{"step unit exited with status 1", "unit: p/a TestBad failed"},
		},
		"a prerequisite skip, which make test requires": {
			steps: []*step{{name: "unit", suite: &suite{passed: 1, skipped: 1, skips: map[string]string{"p/a TestEnv": "env_test.go:20: " + prereq}}}},
			want:  []string{"unit: p/a TestEnv skipped for a missing prerequisite, which make test requires"},
		},
		"a package whose every test skipped": {
			steps: []*step{{name: "unit", suite: &suite{passed: 1, skipped: 1, allSkipped: []string{"p/b"},
				skips: map[string]string{"p/b TestShort": "-short"}}}},
			want: []string{"unit: package p/b skipped every test it has"},
		},
		"a suite that ran nothing": {
			steps: []*step{{name: "e2e", suite: &suite{}}},
			want:  []string{"suite e2e passed no test: a required suite must run"},
		},
		"a suite that ran nothing and failed is reported once, as a failed step": {
			steps: []*step{{name: "e2e", status: 1, suite: &suite{}}},
			want:  []string{"step e2e exited with status 1"},
		},
		"a test whose subtests all skipped": {
			steps: []*step{{name: "e2e", suite: &suite{passed: 1, skipped: 12, skippedParents: []string{"p/e2e TestFlows (11 subtests)"}}}},
			want:  []string{"e2e: p/e2e TestFlows (11 subtests) skipped every subtest it has"},
		},
		"a counts suite with failures": {
			steps: []*step{{name: "kunit", suite: &suite{passed: 10, failed: 1}}},
			want:  []string{"kunit: tests failed: 1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := (&report{steps: tc.steps}).write(io.Discard)
			if diff := gocmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReportOfARun reads a recorded run (every kind of step: no suite, a
// test2json stream, an empty stream, a counts file, failed steps) and
// compares the table with the one make test printed for it.
func TestReportOfARun(t *testing.T) {
	r, err := load("testdata/run")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	problems := r.write(&out)
	want, err := os.ReadFile("testdata/run.golden")
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	wantProblems := []string{
		"step unit exited with status 1",
		"unit: example/a TestBad failed",
		"unit: package example/b skipped every test it has",
		"unit: example/a TestNeedsAPI skipped for a missing prerequisite, which make test requires",
		"suite e2e passed no test: a required suite must run",
		"kmod-arm64: tests failed: 1",
		"step dkms exited with status 2",
	}
	if diff := gocmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestLoadWithoutSteps(t *testing.T) {
	if _, err := load(t.TempDir()); !os.IsNotExist(err) {
		t.Fatalf("load of a directory without steps.tsv = %v, want not-exist", err)
	}
}

// TestBadShapes reads test2json streams of runs that tested nothing while
// go test called them passing, each as the only suite of a make test run,
// and checks the report fails the run and says why. The e2e streams are
// go test -json ./test/e2e/ without KUBEBLADE_E2E: at afb7450, whose
// flows skipped with a plain t.Skip (go test passed TestFlows, and this
// report passed the run); with testreq's skip in a plain run; and under
// KUBEBLADE_TEST_REQUIRED=1. only-skipped-flows.json is the first without
// TestFlowsAreListed, the one test of the package that runs without a
// cluster.
func TestBadShapes(t *testing.T) {
	const e2e = "github.com/kubeblade/kubeblade/test/e2e"
	flows := []string{"DaemonSetRolledOut", "BladectlGetBlades", "IdentifyByAnnotation", "ButtonPressedEvent",
		"OverheatCriticalAndRecovery", "BladeConfigAppliedLive", "AgentsConfinedToTheirNode", "AdmissionPoliciesTypeCheck",
		"FanPeersAcrossProcesses", "LongPressDrainsTheBlade", "OperatorUpgrade"}
	each := func(format string) []string {
		var out []string
		for _, f := range flows {
			out = append(out, fmt.Sprintf(format, f))
		}
		return out
	}
	skippedFlows := "e2e: " + e2e + " TestFlows (11 subtests) skipped every subtest it has"
	for file, want := range map[string][]string{
		"e2e-without-cluster.json": {skippedFlows},
		"e2e-without-cluster-testreq.json": append([]string{skippedFlows},
			each("e2e: "+e2e+" TestFlows/%s skipped for a missing prerequisite, which make test requires")...),
		"e2e-without-cluster-required.json": append([]string{"step e2e exited with status 1"},
			append(each("e2e: "+e2e+" TestFlows/%s failed"), "e2e: "+e2e+" TestFlows failed")...),
		"only-skipped-flows.json": {
			"e2e: package " + e2e + " skipped every test it has",
			skippedFlows,
			"suite e2e passed no test: a required suite must run",
		},
	} {
		t.Run(file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "shapes", file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := parseTest2JSON(f)
			if err != nil {
				t.Fatal(err)
			}
			st := &step{name: "e2e", suite: s}
			if s.failed > 0 {
				st.status = 1 // go test's exit status when a test failed
			}
			got := (&report{steps: []*step{st}}).write(io.Discard)
			if diff := gocmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

var record = flag.Bool("record", false, "TestUnfinishedTests: record testdata/shapes/unfinished-*.json again with go test -json")

// TestUnfinishedTests reads test2json streams of test binaries that stopped
// with a test running, which go test -json records with a "run" and no
// result for that test, and checks that each such test counts as failed,
// with the reason, and nothing else does: not a benchmark, which ends with
// no result when it passes, though a package whose benchmark crashed is
// named. The unfinished-*.json streams are go test -json of
// testdata/unfinished (-record writes them again); the
// deploy-test stream is make test's of a run whose hack/deploy/image
// TestBuild hit its 20-minute -timeout, which this report counted as 45
// passed and none failed.
func TestUnfinishedTests(t *testing.T) {
	const (
		pkg   = "github.com/kubeblade/kubeblade/hack/testreport/testdata/unfinished"
		image = "github.com/kubeblade/kubeblade/hack/deploy/image"
	)
	for _, tc := range []struct {
		file string
		// run, bench and timeout are go test's -run, -bench and -timeout
		// for -record.
		run, bench, timeout string
		passed, failed      int
		// status is go test's exit status.
		status int
		want   []string
	}{{
		file: "unfinished-timeout.json", run: "^(TestPasses|TestParallelWaits|TestHangs)$", timeout: "3s",
		passed: 1, failed: 3, status: 1,
		want: []string{
			"step s exited with status 1",
			"s: " + pkg + " TestParallelWaits failed: no result: waiting in t.Parallel when the test binary timed out after 3s",
			"s: " + pkg + " TestHangs failed: timed out after 3s",
			"s: " + pkg + " TestHangs/blocked failed: timed out after 3s",
		},
	}, {
		file: "unfinished-exit.json", run: "^(TestPasses|TestExits)$",
		passed: 1, failed: 1, status: 1,
		want: []string{"step s exited with status 1", "s: " + pkg + " TestExits failed: no result: the test binary exited"},
	}, {
		file: "unfinished-crash.json", run: "^(TestPasses|TestCrashes)$",
		passed: 1, failed: 1, status: 1,
		want: []string{"step s exited with status 1", "s: " + pkg + " TestCrashes failed: no result: the test binary exited: panic: boom"},
	}, {
		file: "unfinished-killed.json", run: "^(TestPasses|TestKilled)$",
		passed: 1, failed: 1, status: 1,
		want: []string{"step s exited with status 1", "s: " + pkg + " TestKilled failed: no result: the test binary exited: signal: killed"},
	}, {
		file: "unfinished-benchmark.json", run: "^TestPasses$", bench: "^BenchmarkPasses$",
		passed: 1,
	}, {
		file: "unfinished-benchmark-crash.json", run: "^TestPasses$", bench: "^BenchmarkDeadlocks$",
		passed: 1, status: 1,
		want: []string{"step s exited with status 1", "s: package " + pkg + " failed outside its tests: fatal error: all goroutines are asleep - deadlock!"},
	}, {
		file:   "deploy-test-timeout.json",
		passed: 45, failed: 1, status: 1,
		want: []string{"step s exited with status 1", "s: " + image + " TestBuild failed: timed out after 20m0s"},
	}} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "shapes", tc.file)
			if *record && tc.run != "" {
				recordStream(t, path, tc.run, tc.bench, cmp.Or(tc.timeout, "1m"))
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := parseTest2JSON(f)
			if err != nil {
				t.Fatal(err)
			}
			if s.passed != tc.passed || s.failed != tc.failed || s.skipped != 0 {
				t.Errorf("passed %d, failed %d, skipped %d; want passed %d, failed %d, skipped 0",
					s.passed, s.failed, s.skipped, tc.passed, tc.failed)
			}
			got := (&report{steps: []*step{{name: "s", status: tc.status, suite: s}}}).write(io.Discard)
			if diff := gocmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// recordStream writes what go test -json prints for the tests and
// benchmarks of testdata/unfinished that run and bench match to path.
func recordStream(t *testing.T, path, run, bench, timeout string) {
	t.Helper()
	args := []string{"test", "-json", "-trimpath", "-count=1", "-timeout", timeout, "-run", run}
	if bench != "" {
		args = append(args, "-bench", bench, "-benchtime", "100x")
	}
	cmd := exec.Command("go", append(args, "./testdata/unfinished")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
