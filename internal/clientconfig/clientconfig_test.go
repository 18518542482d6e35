package clientconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultPath(t *testing.T) {
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"env var wins": {map[string]string{EnvVar: "/x/y.yaml", "HOME": "/home/a"}, "/x/y.yaml"},
		"XDG":          {map[string]string{"XDG_CONFIG_HOME": "/cfg", "HOME": "/home/a"}, "/cfg/kubeblade/bladectl.yaml"},
		"home":         {map[string]string{"HOME": "/home/a"}, "/home/a/.config/kubeblade/bladectl.yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DefaultPath(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLoadAndSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "bladectl.yaml")
	cfg, exists, err := Load(path)
	if err != nil || exists {
		t.Fatalf("missing file: %v %v", exists, err)
	}
	if diff := cmp.Diff(Default(), cfg); diff != "" {
		t.Errorf("missing file gives (-want +got):\n%s", diff)
	}
	cfg.Set("b1", Blade{Server: "b1:8081", CertificateAuthority: "ca.crt", ClientCertificate: "c.crt", ClientKey: "c.key"})
	cfg.Set("local", Blade{Server: "unix:///tmp/a.sock"})
	if err := Save(path, cfg); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %o", fi.Mode().Perm())
	}
	again, exists, err := Load(path)
	if err != nil || !exists {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"local", "b1"}, again.Names()); diff != "" {
		t.Error(diff)
	}
	if !again.Remove("local") || again.CurrentBlade != "" || again.Remove("local") {
		t.Error("Remove")
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	cases := map[string]string{
		"unknown field": "blades:\n- name: a\n  blade: {server: x, sever: y}\n",
		"duplicate":     "blades:\n- name: a\n  blade: {server: x}\n- name: a\n  blade: {server: y}\n",
		"no name":       "blades:\n- blade: {server: x}\n",
		"wrong kind":    "kind: Pod\nblades: []\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("Load = %v, want an error naming the file", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		b    Blade
		want string
	}{
		"unix":              {Blade{Server: "unix:///run/kubeblade/agent.sock"}, ""},
		"tls":               {Blade{Server: "b:1", CertificateAuthorityData: "x", ClientCertificate: "c", ClientKeyData: "k"}, ""},
		"empty":             {Blade{}, "no server address"},
		"unix without path": {Blade{Server: "unix://"}, "has no path"},
		"scheme":            {Blade{Server: "https://b:1"}, "use unix:///path or host:port"},
		"tcp without CA":    {Blade{Server: "b:1", ClientCertificate: "c", ClientKey: "k"}, "certificate authority"},
		"tcp without key":   {Blade{Server: "b:1", CertificateAuthority: "ca", ClientCertificate: "c"}, "client certificate and key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.b.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
