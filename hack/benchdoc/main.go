// Command benchdoc replaces one generated block of a Markdown file with its
// standard input and leaves every other line of the file as it was. The
// benchmarks (hack/bench.sh, make bench-apicost, the fleet and rack-view
// harnesses) write their tables into docs/performance.md through it, so
// re-running them never touches the hand-written analysis around the tables.
//
// A block is the lines between
//
//	<!-- BEGIN GENERATED name -->
//	<!-- END GENERATED name -->
//
// Usage: benchdoc -file docs/performance.md -block name <table.md
//
// With -check it only checks that the file has the block, reading nothing, so
// a long benchmark can fail before it runs rather than after.
//
// A file without exactly one such pair for the name is an error, and the file
// is then left unchanged.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kubeblade/kubeblade/internal/atomicfile"
)

func main() {
	file := flag.String("file", "docs/performance.md", "Markdown file to update")
	block := flag.String("block", "", "name of the generated block to replace")
	check := flag.Bool("check", false, "only check that the file has the block")
	flag.Parse()
	if *block == "" {
		fmt.Fprintln(os.Stderr, "benchdoc: -block is required")
		os.Exit(2)
	}
	var err error
	if *check {
		err = checkBlock(*file, *block)
	} else {
		err = run(*file, *block, os.Stdin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

func run(file, block string, in io.Reader) error {
	body, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc, err := Replace(string(old), block, string(body))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return atomicfile.Write(file, []byte(doc), 0o644)
}

func checkBlock(file, block string) error {
	old, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if _, err := Replace(string(old), block, ""); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
