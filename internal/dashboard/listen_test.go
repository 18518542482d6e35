package dashboard

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		explicit bool
		exposed  bool
		err      string
	}{
		{addr: "127.0.0.1:8080"},
		{addr: "127.0.0.1:0"},
		{addr: "localhost:8080"},
		{addr: "[::1]:8080"},
		{addr: "127.8.9.10:8080"},
		{addr: "127.0.0.1:8080", explicit: true},
		// Beyond loopback only when typed, and then the caller warns.
		{addr: "0.0.0.0:8080", err: "refusing to serve the dashboard on 0.0.0.0:8080"},
		{addr: ":8080", err: "not a loopback address"},
		{addr: "192.168.1.5:8080", err: "pass --listen 192.168.1.5:8080 yourself"},
		{addr: "wallscreen.local:8080", err: "not a loopback address"},
		{addr: "0.0.0.0:8080", explicit: true, exposed: true},
		{addr: ":8080", explicit: true, exposed: true},
		{addr: "[::]:8080", explicit: true, exposed: true},
		{addr: "wallscreen.local:8080", explicit: true, exposed: true},
		// Malformed.
		{addr: "8080", explicit: true, err: "want HOST:PORT"},
		{addr: "127.0.0.1:", explicit: true, err: "no port"},
	} {
		exposed, err := CheckListen(tc.addr, tc.explicit)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CheckListen(%q, %v) = %v, want an error containing %q", tc.addr, tc.explicit, err, tc.err)
			}
			continue
		}
		if err != nil || exposed != tc.exposed {
			t.Errorf("CheckListen(%q, %v) = %v, %v; want %v, nil", tc.addr, tc.explicit, exposed, err, tc.exposed)
		}
	}
}

func TestOpenCommand(t *testing.T) {
	for goos, want := range map[string][]string{
		"linux":   {"xdg-open", "http://127.0.0.1:8080/"},
		"freebsd": {"xdg-open", "http://127.0.0.1:8080/"},
		"darwin":  {"open", "http://127.0.0.1:8080/"},
		"windows": {"rundll32", "url.dll,FileProtocolHandler", "http://127.0.0.1:8080/"},
	} {
		name, args := OpenCommand(goos, "http://127.0.0.1:8080/")
		if d := cmp.Diff(want, append([]string{name}, args...)); d != "" {
			t.Errorf("%s (-want +got):\n%s", goos, d)
		}
	}
}
