// Command bladectl controls and watches Compute Blades running kubeblade.
// Installed as kubectl-blade it is also the kubectl plugin `kubectl blade`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeblade/kubeblade/internal/bladectl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bladectl.Main(ctx, os.Args[1:], bladectl.Env{
		Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, Getenv: os.Getenv, Argv0: os.Args[0],
	})
	stop()
	os.Exit(code)
}
