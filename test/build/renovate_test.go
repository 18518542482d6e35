package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// renovateConfig is the part of renovate.json these tests read (Renovate's
// configuration options: docs/usage/configuration-options.md in
// github.com/renovatebot/renovate; the regex manager:
// lib/modules/manager/custom/regex/readme.md).
type renovateConfig struct {
	Schema         string    `json:"$schema"`
	IgnorePaths    *[]string `json:"ignorePaths"`
	CustomManagers []struct {
		CustomType          string   `json:"customType"`
		Description         string   `json:"description"`
		ManagerFilePatterns []string `json:"managerFilePatterns"`
		MatchStrings        []string `json:"matchStrings"`
		DatasourceTemplate  string   `json:"datasourceTemplate"`
		DepNameTemplate     string   `json:"depNameTemplate"`
		PackageNameTemplate string   `json:"packageNameTemplate"`
	} `json:"customManagers"`
}

func readRenovate(t *testing.T) renovateConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "renovate.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Renovate reads renovate.json as JSON (not JSON5): no comments, no
	// trailing commas, one value.
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("renovate.json is not valid JSON: %v", err)
	}
	if dec.More() {
		t.Fatal("renovate.json holds more than one JSON value")
	}
	var c renovateConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("renovate.json: %v", err)
	}
	return c
}

// trackedFiles lists the repository's tracked files (slash-separated,
// relative to its root), the files Renovate sees.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		testreq.Unavailable(t, "git ls-files: %v (not a git checkout?)", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if _, err := os.Lstat(filepath.Join(testenv.RepoRoot(), f)); err == nil {
			files = append(files, f)
		}
	}
	return files
}

// filePattern is one managerFilePatterns entry: a regular expression
// between slashes, or else a glob (Renovate's managerFilePatterns).
func filePattern(t *testing.T, p string) func(string) bool {
	t.Helper()
	if len(p) > 1 && strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/") {
		re, err := regexp.Compile(p[1 : len(p)-1])
		if err != nil {
			t.Fatalf("managerFilePatterns %q: %v", p, err)
		}
		return re.MatchString
	}
	if _, err := path.Match(p, ""); err != nil {
		t.Fatalf("managerFilePatterns %q: %v", p, err)
	}
	return func(f string) bool { ok, _ := path.Match(p, f); return ok }
}

// TestRenovateConfig: renovate.json is one JSON object naming Renovate's
// schema, and every regex custom manager still finds what it was written
// for (renovateProblems).
func TestRenovateConfig(t *testing.T) {
	c := readRenovate(t)
	if c.Schema != "https://docs.renovatebot.com/renovate-schema.json" {
		t.Errorf("renovate.json $schema %q, want Renovate's", c.Schema)
	}
	if len(c.CustomManagers) == 0 {
		t.Fatal("renovate.json has no custom managers: hack/*.sh's pinned tools are not kept current")
	}
	files := trackedFiles(t)
	for _, p := range renovateProblems(t, c, files, readTracked(t)) {
		t.Error(p)
	}
	// config:recommended's preset :ignoreModulesAndTests ignores
	// **/test/**, which would hide test/kubelet/go.mod and
	// test/talos/go.mod: renovate.json sets ignorePaths itself, and no
	// go.mod may fall under it.
	if c.IgnorePaths == nil {
		t.Fatal("renovate.json does not set ignorePaths: config:recommended's default ignores **/test/**, and with it test/kubelet/go.mod")
	}
	for _, g := range *c.IgnorePaths {
		re := globRegexp(t, g)
		for _, f := range files {
			if path.Base(f) == "go.mod" && re.MatchString(f) {
				t.Errorf("ignorePaths %q hides %s from Renovate", g, f)
			}
		}
	}
}

// globRegexp translates a Renovate path glob (minimatch: ** spans
// directories, * and ? do not) into a regular expression.
func globRegexp(t *testing.T, g string) *regexp.Regexp {
	t.Helper()
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case g[i] == '*':
			b.WriteString("[^/]*")
		case g[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		t.Fatalf("ignorePaths %q: %v", g, err)
	}
	return re
}

// TestGlobRegexp: the translation agrees with minimatch on the preset's
// pattern that would hide the test modules.
func TestGlobRegexp(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		{"**/test/**", "test/kubelet/go.mod", true},
		{"**/test/**", "a/test/b/go.mod", true},
		{"**/test/**", "hack/tools/kube/go.mod", false},
		{"**/node_modules/**", "test/kubelet/go.mod", false},
		{"**/node_modules/**", "web/node_modules/x/package.json", true},
		{"hack/*.sh", "hack/registry.sh", true},
		{"hack/*.sh", "hack/kernel/build.sh", false},
	} {
		if got := globRegexp(t, c.glob).MatchString(c.path); got != c.want {
			t.Errorf("%q matches %q: %v, want %v", c.glob, c.path, got, c.want)
		}
	}
}

// TestRenovateConfigCatchesADriftedPin: a script whose pinned version no
// longer has the form its manager expects (here quoted) is a problem, named
// with its file, rather than a pin Renovate silently stops updating.
func TestRenovateConfigCatchesADriftedPin(t *testing.T) {
	c := readRenovate(t)
	read := readTracked(t)
	const f = "hack/registry.sh"
	drifted := regexp.MustCompile(`(?m)^version=(v\S+)$`).ReplaceAllString(read(f), `version="$1"`)
	if drifted == read(f) {
		t.Fatalf("%s has no version=v... line to change", f)
	}
	problems := renovateProblems(t, c, trackedFiles(t), func(name string) string {
		if name == f {
			return drifted
		}
		return read(name)
	})
	found := false
	for _, p := range problems {
		found = found || strings.Contains(p, f)
	}
	if !found {
		t.Errorf("a quoted version in %s gave no problem naming it; problems: %q", f, problems)
	}
}

// readTracked reads a tracked file (once).
func readTracked(t *testing.T) func(string) string {
	content := map[string]string{}
	return func(f string) string {
		if s, ok := content[f]; ok {
			return s
		}
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), f))
		if err != nil {
			t.Fatal(err)
		}
		content[f] = string(b)
		return content[f]
	}
}

// renovateProblems checks the regex custom managers against the files:
// each file pattern matches a tracked file, each match string matches in
// those files, and every match yields what Renovate needs to look a
// dependency up (a datasource, a name, a current version). And every
// `# renovate:` comment in a script or the Makefile is matched by some
// manager, so a pin edited past its pattern is found here.
func renovateProblems(t *testing.T, c renovateConfig, files []string, read func(string) string) []string {
	t.Helper()
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// covered records, per file, the offsets of matches.
	covered := map[string]map[int]bool{}
	for i, m := range c.CustomManagers {
		name := fmt.Sprintf("customManagers[%d]", i)
		if m.Description == "" {
			problem("%s has no description", name)
		}
		if m.CustomType != "regex" {
			problem("%s: customType %q, want regex", name, m.CustomType)
			continue
		}
		if len(m.ManagerFilePatterns) == 0 || len(m.MatchStrings) == 0 {
			problem("%s: needs managerFilePatterns and matchStrings", name)
			continue
		}
		var matched []string
		for _, p := range m.ManagerFilePatterns {
			match := filePattern(t, p)
			n := 0
			for _, f := range files {
				if match(f) {
					matched = append(matched, f)
					n++
				}
			}
			if n == 0 {
				problem("%s: managerFilePatterns %q matches no tracked file", name, p)
			}
		}
		for _, ms := range m.MatchStrings {
			// Renovate's regexes are RE2 (node-re2); Go's regexp is RE2 too
			// and takes the same (?<name>...) groups.
			re, err := regexp.Compile(ms)
			if err != nil {
				problem("%s: matchStrings %q: %v", name, ms, err)
				continue
			}
			n := 0
			for _, f := range matched {
				s := read(f)
				group := func(sub []int, g string) string {
					i := re.SubexpIndex(g)
					if i < 0 || sub[2*i] < 0 {
						return ""
					}
					return s[sub[2*i]:sub[2*i+1]]
				}
				for _, sub := range re.FindAllStringSubmatchIndex(s, -1) {
					n++
					where := f + ": " + strings.SplitN(s[sub[0]:sub[1]], "\n", 2)[0]
					if group(sub, "currentValue") == "" {
						problem("%s: %s: no currentValue", name, where)
					}
					if group(sub, "datasource") == "" && m.DatasourceTemplate == "" {
						problem("%s: %s: no datasource (group or datasourceTemplate)", name, where)
					}
					if group(sub, "depName") == "" && group(sub, "packageName") == "" && m.DepNameTemplate == "" && m.PackageNameTemplate == "" {
						problem("%s: %s: no depName or packageName (group or template)", name, where)
					}
					if covered[f] == nil {
						covered[f] = map[int]bool{}
					}
					covered[f][sub[0]] = true
					t.Logf("%s: %s %s", name, where, group(sub, "currentValue"))
				}
			}
			if n == 0 {
				problem("%s: matchStrings %q matches nothing in %v", name, ms, matched)
			}
		}
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".sh") && f != "Makefile" {
			continue
		}
		s := read(f)
		for off := 0; ; {
			i := strings.Index(s[off:], "# renovate: ")
			if i < 0 {
				break
			}
			if !covered[f][off+i] {
				problem("%s:%d: a `# renovate:` comment that no custom manager in renovate.json matches", f, strings.Count(s[:off+i], "\n")+1)
			}
			off += i + 1
		}
	}
	return problems
}
