package operator_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	module      = "github.com/kubeblade/kubeblade"
	operatorPkg = module + "/internal/operator"
	controllers = operatorPkg + "/controller/"
	optestPkg   = operatorPkg + "/optest"
)

// goList returns each package of the module with its direct imports and
// its transitive dependencies (test files excluded: they may wire several
// controllers together).
func goList(t *testing.T) (imports, deps map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports, deps = map[string][]string{}, map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		imports[f[0]] = strings.Fields(f[1])
		deps[f[0]] = strings.Fields(f[2])
	}
	return imports, deps
}

// TestControllersAreIndependent keeps the operator's shape: one package per
// controller under controller/, wired together only by package operator,
// sharing building blocks that know no controller.
func TestControllersAreIndependent(t *testing.T) {
	imports, deps := goList(t)
	var ctrls []string
	for p := range imports {
		if strings.HasPrefix(p, controllers) {
			ctrls = append(ctrls, p)
		}
	}
	slices.Sort(ctrls)
	if len(ctrls) < 7 {
		t.Fatalf("found controller packages %v, want the seven of the operator under %s", ctrls, controllers)
	}
	for p, imps := range imports {
		for _, imp := range imps {
			if strings.HasPrefix(imp, controllers) && p != operatorPkg {
				t.Errorf("%s imports controller %s: only %s wires controllers", p, imp, operatorPkg)
			}
		}
	}
	for p, ds := range deps {
		if !strings.HasPrefix(p, operatorPkg+"/") || p == optestPkg {
			continue
		}
		for _, d := range ds {
			if d == operatorPkg || (strings.HasPrefix(d, controllers) && d != p) {
				t.Errorf("%s depends on %s: a controller or building block must not reach another controller", p, d)
			}
		}
	}
	for _, c := range ctrls {
		var shared []string
		for _, imp := range imports[c] {
			if strings.HasPrefix(imp, operatorPkg+"/") {
				shared = append(shared, strings.TrimPrefix(imp, operatorPkg+"/"))
			}
		}
		t.Logf("%s -> %v", strings.TrimPrefix(c, operatorPkg+"/"), shared)
	}
}
