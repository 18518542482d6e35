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

// parseCounts reads a <name>.counts file: "passed=N failed=N skipped=N".
func parseCounts(name string, b []byte) (*suite, error) {
	s := &suite{skips: map[string]string{}}
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
	s := &suite{skips: map[string]string{}}
	output := map[string]*strings.Builder{} // per test, for skip reasons
	nodes := map[string]*node{}             // per test with subtests ended
	notSkipped := map[string]int{}          // per package
	skippedIn := map[string]int{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // build output interleaved by go test; not an event
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
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
				continue
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
	for pkg := range skippedIn {
		if notSkipped[pkg] == 0 {
			s.allSkipped = append(s.allSkipped, pkg)
		}
	}
	slices.Sort(s.allSkipped)
	return s, sc.Err()
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
			problems = append(problems, fmt.Sprintf("%s: %s failed", s.name, f))
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
