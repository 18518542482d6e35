package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestFlowsAreListed: every flow of the package (a func testXxx(t
// *testing.T)) is in flows, exactly once, and no other top-level Test runs
// on the shared cluster: go test would order such a test by file name,
// before or after OperatorUpgrade by accident. It reads the package's
// source, so it runs without a cluster too.
func TestFlowsAreListed(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the package's test files: %v %v", files, err)
	}
	allowed := []string{"TestMain", "TestFlows", "TestFlowsAreListed"}
	var defined []string
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			name := fd.Name.Name
			switch {
			case strings.HasPrefix(name, "Test") && !slices.Contains(allowed, name):
				t.Errorf("%s: top-level %s would run in file-name order; make it a flow (func test%s, listed in flows)",
					fset.Position(fd.Pos()), name, strings.TrimPrefix(name, "Test"))
			case isFlow(fd):
				defined = append(defined, name)
			}
		}
	}
	var listed []string
	for _, f := range flows {
		fn := runtime.FuncForPC(reflect.ValueOf(f.run).Pointer()).Name()
		listed = append(listed, fn[strings.LastIndex(fn, ".")+1:])
	}
	slices.Sort(defined)
	sortedListed := slices.Clone(listed)
	slices.Sort(sortedListed)
	if !slices.Equal(defined, sortedListed) {
		t.Errorf("flows lists %v; the package defines %v", sortedListed, defined)
	}
	if last := listed[len(listed)-1]; last != "testOperatorUpgrade" {
		t.Errorf("the last flow is %s; testOperatorUpgrade replaces the operator and must run last", last)
	}
}

// isFlow says whether fd is func testXxx(t *testing.T).
func isFlow(fd *ast.FuncDecl) bool {
	name := fd.Name.Name
	if !strings.HasPrefix(name, "test") || len(name) == 4 || !unicode.IsUpper(rune(name[4])) {
		return false
	}
	p := fd.Type.Params.List
	if len(p) != 1 || len(p[0].Names) != 1 || fd.Type.Results != nil {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}
