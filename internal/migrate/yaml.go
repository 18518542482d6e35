package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// parseMapping reads the first YAML document of raw (viper reads only the
// first) and returns its top-level mapping. Syntax errors are reported
// with their line.
func parseMapping(raw []byte, f *findings) *yaml.Node {
	var doc yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(raw)).Decode(&doc)
	switch {
	case errors.Is(err, io.EOF):
		f.fail(0, "", "the file is empty")
		return nil
	case err != nil:
		line, msg := yamlErrorLine(err)
		f.fail(line, "", "not valid YAML: %s", msg)
		return nil
	}
	root := resolve(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		f.fail(root.Line, "", "the file is a YAML %s, not a mapping of keys", kindName(root))
		return nil
	}
	return root
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// parserProblems are the problems yaml.v3's parser (not its scanner)
// reports. For them it prints a 0-based line (decode.go, parser.fail adds
// 1 only for scanner errors), often the line where the enclosing mapping
// or list starts.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'": true, "did not find expected ',' or '}'": true,
	"did not find expected '-' indicator": true, "did not find expected <document start>": true,
	"did not find expected <stream-start>": true, "did not find expected key": true,
	"did not find expected node content": true, "found duplicate %TAG directive": true,
	"found duplicate %YAML directive": true, "found incompatible YAML document": true,
	"found undefined tag handle": true,
}

// yamlErrorLine splits "yaml: line 7: did not find …" into the 1-based
// line and the rest.
func yamlErrorLine(err error) (int, string) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		rest := msg[len(m[0]):]
		if parserProblems[rest] {
			n++
		}
		return n, rest
	}
	return 0, strings.TrimPrefix(msg, "yaml: ")
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.ScalarNode:
		return "scalar (" + strings.TrimPrefix(n.Tag, "!!") + ")"
	}
	return "document"
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// entry is one key of a mapping.
type entry struct {
	// name is the key as written; lookups fold case as viper does.
	name string
	key  *yaml.Node
	val  *yaml.Node
}

// mapping is a YAML mapping whose keys are matched case-insensitively.
type mapping struct {
	path    string
	entries []entry
	byKey   map[string]int
	used    map[string]bool
}

// newMapping reads n as a mapping at path. Keys that differ only in case
// are refused: viper folds them together and which value wins is not
// defined.
func newMapping(n *yaml.Node, path string, f *findings) (*mapping, bool) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		f.fail(n.Line, path, "want a mapping of keys, got a %s", kindName(n))
		return nil, false
	}
	m := &mapping{path: path, byKey: map[string]int{}, used: map[string]bool{}}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		low := strings.ToLower(k.Value)
		if j, dup := m.byKey[low]; dup {
			f.fail(k.Line, join(path, k.Value), "also set on line %d (keys are not case-sensitive)", m.entries[j].key.Line)
			ok = false
			continue
		}
		m.byKey[low] = len(m.entries)
		m.entries = append(m.entries, entry{name: k.Value, key: k, val: v})
	}
	return m, ok
}

// get returns the value of key (nil when absent or null) and marks it used.
func (m *mapping) get(key string) (*entry, bool) {
	i, ok := m.byKey[key]
	if !ok {
		return nil, false
	}
	m.used[key] = true
	e := &m.entries[i]
	if isNull(e.val) {
		return e, false
	}
	return e, true
}

// unused lists the entries no get asked for, in file order.
func (m *mapping) unused() []entry {
	var out []entry
	for _, e := range m.entries {
		if !m.used[strings.ToLower(e.name)] {
			out = append(out, e)
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// The scalar conversions follow mapstructure's weakly typed decoding,
// which viper uses: numbers and booleans may be written as strings,
// booleans as numbers.

func asBool(n *yaml.Node) (bool, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return false, fmt.Errorf("want true or false, got a %s", kindName(n))
	}
	switch n.Tag {
	case "!!bool", "!!str":
		if n.Tag == "!!str" && n.Value == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			return false, fmt.Errorf("want true or false, got %q", n.Value)
		}
		return b, nil
	case "!!int", "!!float":
		v, err := asNumber(n)
		return v != 0, err
	}
	return false, fmt.Errorf("want true or false, got %q", n.Value)
}

func asNumber(n *yaml.Node) (float64, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a number, got a %s", kindName(n))
	}
	switch n.Tag {
	case "!!int", "!!float", "!!str":
		var v float64
		if err := n.Decode(&v); err == nil && n.Tag != "!!str" {
			return v, nil
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("want a number, got %q", n.Value)
		}
		return v, nil
	}
	return 0, fmt.Errorf("want a number, got %q", n.Value)
}

// asWhole reads a whole number within [lo, hi].
func asWhole(n *yaml.Node, lo, hi int64) (int64, error) {
	v, err := asNumber(n)
	if err != nil {
		return 0, err
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("want a whole number, got %s", resolve(n).Value)
	}
	if v < float64(lo) || v > float64(hi) {
		return 0, fmt.Errorf("%s is outside %d–%d", resolve(n).Value, lo, hi)
	}
	return int64(v), nil
}

func asString(n *yaml.Node) (string, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("want a string, got a %s", kindName(n))
	}
	return n.Value, nil
}
