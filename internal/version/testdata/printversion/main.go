// Command printversion prints what internal/version reports, one field a
// line, for version_test.go's builds.
package main

import (
	"fmt"
	"time"

	"github.com/kubeblade/kubeblade/internal/version"
)

func main() {
	i := version.Get()
	d := ""
	if !i.Date.IsZero() {
		d = i.Date.UTC().Format(time.RFC3339)
	}
	fmt.Printf("%s\n%s\n%s\n", i.Version, i.Commit, d)
}
