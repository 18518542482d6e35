// Command docpics writes the documentation's pictures into docs/img
// (`make docs`); internal/docpics draws them.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeblade/kubeblade/internal/docpics"
)

func main() {
	out := flag.String("out", "docs/img", "directory to write the pictures into")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range docpics.Names() {
		p := filepath.Join(*out, name)
		if err := os.WriteFile(p, docpics.Pictures[name](), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p)
	}
}
