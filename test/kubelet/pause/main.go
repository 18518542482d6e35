// Command pause is the pod sandbox's process for the real-kubelet suite: it
// holds the pod's namespaces open and exits on SIGINT or SIGTERM, like the
// upstream pause container, built from Go so that no image is downloaded.
// As PID 1 of the sandbox it also reaps children re-parented to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
