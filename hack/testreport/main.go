// Command testreport prints the end-of-run table of `make test`: for every
// step its wall time, and for every test suite how many tests ran, passed,
// failed and were skipped, read from the test2json streams gotestsum
// recorded (or a counts file for suites that are not Go tests). It exits
// non-zero when a step failed, a test failed, a suite ran no test at all,
// a package or a test with subtests skipped everything it has, or a test
// skipped because a prerequisite was missing: under make test every suite
// is required, so a skip of either kind means something was not tested.
//
// A test whose subtests all skipped counts as skipped, not passed: go test
// reports such a parent as passing, and a suite of flows that all skipped
// (an end-to-end suite without its cluster, say) must not look green.
//
// A test that started and never ended counts as failed, with the reason its
// test binary gave: test2json writes no result for a test that was running
// when go test's -timeout panicked, when the binary crashed (a panic on
// another goroutine, os.Exit, a fatal error) or when it was killed, only the
// package's failure. A package that failed, or never ended, without a failed
// test (a build failure, TestMain, a crashed benchmark) is a problem of its
// own.
//
//	go run ./hack/testreport <report-dir>
//
// The directory holds steps.tsv (name, seconds, exit status, one step per
// line, written by hack/test.sh), <suite>.json (test2json) and
// <suite>.counts ("passed=N failed=N skipped=N", for KUnit and the like).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// prerequisiteMarker starts the reason internal/testreq gives a skip.
const prerequisiteMarker = "SKIP (prerequisite missing)"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testreport <report-dir>")
		os.Exit(2)
	}
	r, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	problems := r.write(os.Stdout)
	if len(problems) > 0 {
		fmt.Println()
		for _, p := range problems {
			fmt.Println("FAIL:", p)
		}
		os.Exit(1)
	}
}

type step struct {
	name    string
	seconds float64
	status  int
	suite   *suite // nil for steps that run no tests
}

type suite struct {
	passed, failed, skipped int
	// skips maps "package Test" to the reason the test gave.
	skips map[string]string
	// failures lists "package Test" of failed tests.
	failures []string
	// allSkipped lists packages whose every test skipped: a package must
	// never pass having run none of its tests.
	allSkipped []string
	// skippedParents lists "package Test (N subtests)" of tests whose every
	// subtest skipped: a group of tests must never pass having run none.
	skippedParents []string
	// unfinished maps "package Test" of failed tests that had no result
	// (binary.unfinished) to what stopped them.
	unfinished map[string]string
	// failedPackages maps packages that failed while none of their tests
	// did to what the stream says of why ("" if nothing).
	failedPackages map[string]string
}

type report struct{ steps []*step }

func load(dir string) (*report, error) {
	f, err := os.Open(filepath.Join(dir, "steps.tsv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	steps, err := parseSteps(f)
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		if s.suite, err = loadSuite(dir, s.name); err != nil {
			return nil, fmt.Errorf("step %s: %w", s.name, err)
		}
	}
	return &report{steps: steps}, nil
}

// parseSteps reads steps.tsv: name, seconds and exit status, tab-separated,
// one step per line; lines of another shape are not steps.
func parseSteps(rd io.Reader) ([]*step, error) {
	var steps []*step
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 {
			continue
		}
		secs, _ := strconv.ParseFloat(fields[1], 64)
		status, _ := strconv.Atoi(fields[2])
		steps = append(steps, &step{name: fields[0], seconds: secs, status: status})
	}
	return steps, sc.Err()
}

func loadSuite(dir, name string) (*suite, error) {
	if f, err := os.Open(filepath.Join(dir, name+".json")); err == nil {
		defer f.Close()
		return parseTest2JSON(f)
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".counts"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCounts(name, b)
}

func newSuite() *suite {
	return &suite{skips: map[string]string{}, unfinished: map[string]string{}, failedPackages: map[string]string{}}
}

// parseCounts reads a <name>.counts file: "passed=N failed=N skipped=N".
func parseCounts(name string, b []byte) (*suite, error) {
	s := newSuite()
	for _, kv := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%s.counts: %q is not key=number", name, kv)
		}
		switch k {
		case "passed":
			s.passed = n
		case "failed":
			s.failed = n
		case "skipped":
			s.skipped = n
		default:
			return nil, fmt.Errorf("%s.counts: unknown key %q", name, k)
		}
	}
	return s, nil
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// node is what parseTest2JSON knows of one test while its subtests end.
type node struct {
	subtests, skippedSubtests int
}

func parseTest2JSON(rd io.Reader) (*suite, error) {
	s := newSuite()
	output := map[string]*strings.Builder{} // per test, for skip reasons
	nodes := map[string]*node{}             // per test with subtests ended
	notSkipped := map[string]int{}          // per package
	skippedIn := map[string]int{}
	binaries := map[string]*binary{} // per package whose result is not in yet
	var order []string               // of binaries, for the end of the stream
	bin := func(pkg string) *binary {
		b := binaries[pkg]
		if b == nil {
			b = newBinary()
			binaries[pkg] = b
			order = append(order, pkg)
		}
		return b
	}
	// finish counts the tests of pkg's binary that never ended as failed;
	// result is the package's own ("" when the stream ended first).
	finish := func(pkg, result string) {
		b := binaries[pkg]
		if b == nil {
			return
		}
		delete(binaries, pkg)
		for _, name := range b.unfinished() {
			key := pkg + " " + name
			s.failed++
			if !strings.Contains(name, "/") {
				notSkipped[pkg]++
			}
			s.failures = append(s.failures, key)
			s.unfinished[key] = b.reason(name, result)
			b.failed++
		}
		if (result == "fail" || result == "" && b.started) && b.failed == 0 {
			s.failedPackages[pkg] = b.packageReason(result)
		}
	}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // build output interleaved by go test; not an event
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "start":
			bin(e.Package).started = true
		case "run", "pause", "cont":
			// A benchmark that ran to the end has a "run" and no result
			// (test2json reads none from its result line), so only a
			// failure or skip says how it went; one that never ended
			// fails its package, which is reported as such.
			if e.Test != "" && !strings.HasPrefix(e.Test, "Benchmark") {
				bin(e.Package).track(e.Test, e.Action)
			}
		case "output":
			// The test binary's last words are attributed to whichever
			// test test2json saw last, or to none.
			bin(e.Package).read(e.Output)
			if e.Test == "" {
				continue
			}
			b := output[key]
			if b == nil {
				b = &strings.Builder{}
				output[key] = b
			}
			if b.Len() < 4096 {
				b.WriteString(e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				finish(e.Package, e.Action)
				continue
			}
			b := bin(e.Package)
			b.ended(e.Test)
			if e.Action == "fail" {
				b.failed++
			}
			action := e.Action
			// Subtests end before their parent, so by now the parent
			// knows all of them. go test passes a parent whose subtests
			// all skipped; it ran nothing, so it is a skip here.
			n := nodes[key]
			allSubtestsSkipped := n != nil && n.subtests > 0 && n.skippedSubtests == n.subtests
			if action == "pass" && allSubtestsSkipped {
				action = "skip"
			}
			// A package counts its top-level tests; a parent stands for
			// its subtests.
			topLevel := !strings.Contains(e.Test, "/")
			switch action {
			case "pass":
				s.passed++
				if topLevel {
					notSkipped[e.Package]++
				}
			case "fail":
				s.failed++
				if topLevel {
					notSkipped[e.Package]++
				}
				s.failures = append(s.failures, key)
			case "skip":
				s.skipped++
				if topLevel {
					skippedIn[e.Package]++
				}
				reason := skipReason(output[key])
				if allSubtestsSkipped {
					reason = strings.TrimSpace(fmt.Sprintf("every one of its %d subtests skipped %s", n.subtests, reason))
					s.skippedParents = append(s.skippedParents, fmt.Sprintf("%s (%d subtests)", key, n.subtests))
				}
				s.skips[key] = reason
			}
			if i := strings.LastIndex(e.Test, "/"); i > 0 {
				pkey := e.Package + " " + e.Test[:i]
				p := nodes[pkey]
				if p == nil {
					p = &node{}
					nodes[pkey] = p
				}
				p.subtests++
				if action == "skip" {
					p.skippedSubtests++
				}
			}
			delete(output, key)
			delete(nodes, key)
		}
	}
	for _, pkg := range order {
		finish(pkg, "")
	}
	for pkg := range skippedIn {
		if notSkipped[pkg] == 0 {
			s.allSkipped = append(s.allSkipped, pkg)
		}
	}
	slices.Sort(s.allSkipped)
	return s, sc.Err()
}

// binary is what parseTest2JSON knows of one package's test binary while
// it runs: the tests that started and have not ended, and what the binary
// said when it stopped.
type binary struct {
	started bool            // test2json's "start": the package's binary began
	open    map[string]bool // test name → started and not ended
	order   []string        // of starts
	paused  map[string]bool // in t.Parallel, waiting for its turn
	failed  int             // tests that failed
	// timeout is the -timeout the testing package's alarm panicked with
	// ("20m0s"); running lists the tests it said were running then.
	timeout     string
	running     map[string]bool
	readRunning bool
	// died is the first line the runtime or go test printed when the
	// binary died ("panic: boom", "fatal error: …", "signal: killed", or
	// go test's "*** Test killed …: ran too long" a minute after a
	// -timeout the binary did not act on).
	died string
	// marker is go test's note on a package that never ran ("[build
	// failed]", "[setup failed]").
	marker string
}

func newBinary() *binary {
	return &binary{open: map[string]bool{}, paused: map[string]bool{}, running: map[string]bool{}}
}

func (b *binary) track(test, action string) {
	switch action {
	case "run":
		if !b.open[test] {
			b.open[test] = true
			b.order = append(b.order, test)
		}
	case "pause":
		b.paused[test] = true
	case "cont":
		delete(b.paused, test)
	}
}

func (b *binary) ended(test string) {
	delete(b.open, test)
	delete(b.paused, test)
}

// streamEnded is why a test or package has no result when the stream ends
// before its package's: go test, or make test, was stopped.
const streamEnded = "no result: the stream ended before its package's result (go test did not finish)"

// timeoutPanic starts the panic of the testing package's -timeout alarm
// (testing.(*M).startAlarm); "\trunning tests:" follows it, then a line
// "\t\tName (duration)" per running test.
const timeoutPanic = "panic: test timed out after "

// read takes one output line of the binary (or go test's about it).
func (b *binary) read(out string) {
	line := strings.TrimRight(out, "\n")
	if b.readRunning {
		if name, ok := strings.CutPrefix(line, "\t\t"); ok {
			if i := strings.LastIndex(name, " ("); i > 0 {
				name = name[:i]
			}
			b.running[name] = true
			return
		}
		b.readRunning = false
	}
	switch {
	case strings.HasPrefix(line, timeoutPanic) && b.timeout == "":
		b.timeout = strings.TrimPrefix(line, timeoutPanic)
	case line == "\trunning tests:" && b.timeout != "":
		b.readRunning = true
	case b.died == "" && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") ||
		strings.HasPrefix(line, "signal: ") || strings.HasPrefix(line, "*** Test killed")):
		b.died = line
	case strings.HasPrefix(line, "FAIL\t") && strings.HasSuffix(line, "]"):
		if i := strings.LastIndex(line, " ["); i > 0 {
			b.marker = line[i+1:]
		}
	}
}

// unfinished returns the tests that started and did not end, in the order
// they started.
func (b *binary) unfinished() []string {
	var out []string
	for _, name := range b.order {
		if b.open[name] {
			out = append(out, name)
			delete(b.open, name)
		}
	}
	return out
}

// reason says why a test that started has no result, given its package's
// result ("" if the stream ended before it).
func (b *binary) reason(test, result string) string {
	switch {
	case b.timeout != "" && (len(b.running) == 0 || b.running[test]):
		return "timed out after " + b.timeout
	case b.timeout != "" && b.paused[test]:
		return "no result: waiting in t.Parallel when the test binary timed out after " + b.timeout
	case b.timeout != "":
		return "no result: the test binary timed out after " + b.timeout
	case result == "":
		return streamEnded
	case b.died != "":
		return "no result: the test binary exited: " + b.died
	case result == "fail":
		return "no result: the test binary exited"
	default:
		return "no result, though its package's result was " + result
	}
}

// packageReason says, as far as the stream does, why a package failed
// outside its tests, given its result ("" if the stream ended before it).
func (b *binary) packageReason(result string) string {
	switch {
	case result == "":
		return streamEnded
	case b.timeout != "":
		return cmp.Or(b.marker, "timed out after "+b.timeout)
	}
	return cmp.Or(b.marker, b.died)
}

// skipReason picks the message a skipped test logged: the lines after its
// "=== RUN" and before "--- SKIP".
func skipReason(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		lines = append(lines, t)
	}
	return strings.Join(lines, " ")
}

// write prints the report to w and returns what makes the run fail, in the
// order main prints it.
func (r *report) write(w io.Writer) (problems []string) {
	fmt.Fprintln(w, "make test: steps and suites")
	fmt.Fprintf(w, "%-22s %9s %7s %7s %7s %8s\n", "step", "time", "tests", "passed", "failed", "skipped")
	var total float64
	var all suite
	for _, s := range r.steps {
		total += s.seconds
		line := fmt.Sprintf("%-22s %9s", s.name, dur(s.seconds))
		if s.suite != nil {
			t := s.suite
			line += fmt.Sprintf(" %7d %7d %7d %8d", t.passed+t.failed+t.skipped, t.passed, t.failed, t.skipped)
			all.passed += t.passed
			all.failed += t.failed
			all.skipped += t.skipped
		}
		if s.status != 0 {
			line += fmt.Sprintf("   exit status %d", s.status)
			problems = append(problems, fmt.Sprintf("step %s exited with status %d", s.name, s.status))
		}
		fmt.Fprintln(w, line)
		if s.suite == nil {
			continue
		}
		for _, f := range s.suite.failures {
			p := fmt.Sprintf("%s: %s failed", s.name, f)
			if why := s.suite.unfinished[f]; why != "" {
				p += ": " + why
			}
			problems = append(problems, p)
		}
		for _, pkg := range sortedKeys(s.suite.failedPackages) {
			p := fmt.Sprintf("%s: package %s failed outside its tests", s.name, pkg)
			if why := s.suite.failedPackages[pkg]; why != "" {
				p += ": " + why
			}
			problems = append(problems, p)
		}
		// A counts file names no test, and its runner may exit 0 with
		// failures: the count alone fails the run.
		if n := s.suite.failed - len(s.suite.failures); n > 0 {
			problems = append(problems, fmt.Sprintf("%s: tests failed: %d", s.name, n))
		}
		for _, pkg := range s.suite.allSkipped {
			problems = append(problems, fmt.Sprintf("%s: package %s skipped every test it has", s.name, pkg))
		}
		for _, p := range s.suite.skippedParents {
			problems = append(problems, fmt.Sprintf("%s: %s skipped every subtest it has", s.name, p))
		}
		if s.status == 0 && s.suite.passed == 0 {
			problems = append(problems, fmt.Sprintf("suite %s passed no test: a required suite must run", s.name))
		}
		for _, k := range sortedKeys(s.suite.skips) {
			if strings.Contains(s.suite.skips[k], prerequisiteMarker) {
				problems = append(problems, fmt.Sprintf("%s: %s skipped for a missing prerequisite, which make test requires", s.name, k))
			}
		}
	}
	fmt.Fprintf(w, "%-22s %9s %7d %7d %7d %8d\n", "total (step sum)", dur(total), all.passed+all.failed+all.skipped, all.passed, all.failed, all.skipped)

	// The closing line of each suite, in the form every suite's own runner
	// prints it (the guest's console, the real-kubelet suite), which the
	// per-package console format above hides.
	fmt.Fprintln(w)
	for _, s := range r.steps {
		if s.suite != nil {
			fmt.Fprintf(w, "%s: %d passed, %d failed\n", s.name, s.suite.passed, s.suite.failed)
		}
	}

	var skipped []string
	for _, s := range r.steps {
		if s.suite == nil {
			continue
		}
		for _, k := range sortedKeys(s.suite.skips) {
			skipped = append(skipped, fmt.Sprintf("  %s: %s — %s", s.name, k, cmp.Or(s.suite.skips[k], "(no reason given)")))
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintln(w, "\nskipped tests and their reasons:")
		for _, l := range skipped {
			fmt.Fprintln(w, l)
		}
	}
	return problems
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func dur(secs float64) string {
	return (time.Duration(secs * float64(time.Second))).Round(100 * time.Millisecond).String()
}
