package dashboard

import (
	"fmt"
	"net"
	"strings"
)

// DefaultListen is where the dashboard listens unless told otherwise: only
// this machine can reach it.
const DefaultListen = "127.0.0.1:8080"

// CheckListen decides whether the dashboard may listen on addr. A loopback
// address is always fine. Anything else lets other machines use the page,
// and the page acts with the caller's Kubernetes credentials: it is
// refused unless the person typed it (explicit), and then exposed is true
// so the caller warns. Host names other than localhost count as exposed:
// what they resolve to can change.
func CheckListen(addr string, explicit bool) (exposed bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--listen %q: want HOST:PORT, e.g. %s", addr, DefaultListen)
	}
	if port == "" {
		return false, fmt.Errorf("--listen %q: no port (e.g. %s; port 0 picks a free one)", addr, DefaultListen)
	}
	if Loopback(host) {
		return false, nil
	}
	if !explicit {
		return true, fmt.Errorf("refusing to serve the dashboard on %s: it is not a loopback address, and the page acts "+
			"with your Kubernetes credentials; pass --listen %s yourself if that is what you want", addr, addr)
	}
	return true, nil
}

// Loopback reports whether host (from a HOST:PORT) only reaches this
// machine: localhost or a loopback IP. An empty host is every interface.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ExposedWarning is what the command says when it serves beyond loopback.
func ExposedWarning(addr string) string {
	return fmt.Sprintf("warning: serving on %s, which other machines can reach: anyone who can open the page "+
		"sees the cluster's blades and can toggle identify with YOUR Kubernetes credentials", addr)
}

// OpenCommand is the command that opens url in the desktop's browser.
func OpenCommand(goos, url string) (string, []string) {
	switch goos {
	case "darwin":
		return "open", []string{url}
	case "windows":
		return "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	return "xdg-open", []string{url}
}
