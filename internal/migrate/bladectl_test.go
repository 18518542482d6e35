package migrate

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// creds are a CA and a client key pair, PEM, as the old agent makes them
// (here signed by kubeblade's pki; the format is the same PEM).
type creds struct{ ca, cert, key []byte }

func newCreds(t *testing.T) creds {
	t.Helper()
	now := time.Now()
	ca, caKP, err := pki.NewCA("test-ca", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Request{CommonName: "localhost", Usage: pki.UsageClient}, now)
	if err != nil {
		t.Fatal(err)
	}
	return creds{caKP.CertPEM, kp.CertPEM, kp.KeyPEM}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// oldFile is an old bladectl config with one TCP blade with credentials
// and one socket blade written as the old agent writes it (a bare path).
func oldFile(c creds) string {
	return "blades:\n" +
		"    - name: blade-pi1\n" +
		"      blade:\n" +
		"        server: blade-pi1.local:8081\n" +
		"        cert:\n" +
		"            certificate-authority-data: " + b64(c.ca) + "\n" +
		"            client-certificate-data: " + b64(c.cert) + "\n" +
		"            client-key-data: " + b64(c.key) + "\n" +
		"    - name: blade-pi2\n" +
		"      blade:\n" +
		"        server: /tmp/compute-blade-agent.sock\n" +
		"current-blade: blade-pi1\n"
}

func TestImportOldBladectlConfig(t *testing.T) {
	c := newCreds(t)
	cfg, warnings, err := ImportBladectlConfig([]byte(oldFile(c)), "config.yaml", ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %v", warnings)
	}
	want := &clientconfig.Config{CurrentBlade: "blade-pi1", Blades: []clientconfig.NamedBlade{
		{Name: "blade-pi1", Blade: clientconfig.Blade{Server: "blade-pi1.local:8081",
			CertificateAuthorityData: b64(c.ca), ClientCertificateData: b64(c.cert), ClientKeyData: b64(c.key)}},
		{Name: "blade-pi2", Blade: clientconfig.Blade{Server: "unix:///tmp/compute-blade-agent.sock"}},
	}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, b := range cfg.Blades {
		if err := b.Blade.Validate(); err != nil {
			t.Errorf("%s: %v", b.Name, err)
		}
	}
}

// TestBladectlRoundTrip: import → export → import is stable, and
// export of that is byte-for-byte the first export.
func TestBladectlRoundTrip(t *testing.T) {
	c := newCreds(t)
	first, _, err := ImportBladectlConfig([]byte(oldFile(c)), "config.yaml", ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exported, warnings, err := ExportBladectlConfig(first, nil, "", "bladectl.yaml")
	if err != nil || len(warnings) != 0 {
		t.Fatalf("export: %v %v", err, warnings)
	}
	second, _, err := ImportBladectlConfig(exported, "exported.yaml", ImportOptions{})
	if err != nil {
		t.Fatalf("import of the export: %v\n%s", err, exported)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("import → export → import changed the config (-first +second):\n%s", diff)
	}
	again, _, err := ExportBladectlConfig(second, nil, "", "bladectl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(exported), string(again)); diff != "" {
		t.Errorf("export is not stable (-first +second):\n%s", diff)
	}
	// The socket blade goes out as a URL the old bladectl's grpc.NewClient
	// dials (a bare path would go to its DNS resolver).
	if !strings.Contains(string(exported), "server: unix:///tmp/compute-blade-agent.sock\n") {
		t.Errorf("export:\n%s", exported)
	}
}

// TestExportReadsCertificateFiles: kubeblade blades with certificate
// files are exported with the files' contents inline; a TCP blade whose
// files are gone fails the export instead of losing its TLS.
func TestExportReadsCertificateFiles(t *testing.T) {
	c := newCreds(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.pem": c.ca, "admin.pem": c.cert, "admin-key.pem": c.key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &clientconfig.Config{CurrentBlade: "b"}
	cfg.Set("b", clientconfig.Blade{Server: "10.0.0.5:8081", TLSServerName: "blade-b",
		CertificateAuthority: "ca.pem", ClientCertificate: filepath.Join(dir, "admin.pem"), ClientKey: "admin-key.pem"})
	out, warnings, err := ExportBladectlConfig(cfg, nil, dir, "bladectl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{b64(c.ca), b64(c.cert), b64(c.key), "server: 10.0.0.5:8081"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("export lacks %.40s…:\n%s", s, out)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].String(), `the old bladectl cannot be told to expect "blade-b": it checks "10.0.0.5"`) {
		t.Errorf("warnings: %v", warnings)
	}

	if err := os.Remove(filepath.Join(dir, "admin-key.pem")); err != nil {
		t.Fatal(err)
	}
	_, _, err = ExportBladectlConfig(cfg, nil, dir, "bladectl.yaml")
	if err == nil || !strings.Contains(err.Error(), `blade "b": cannot export its mutual-TLS credentials`) ||
		!strings.Contains(err.Error(), "without them the old bladectl would connect without TLS") {
		t.Errorf("export without the key: %v", err)
	}
}

func TestImportCertificateFiles(t *testing.T) {
	c := newCreds(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.pem": c.ca, "client.pem": c.cert, "client-key.pem": c.key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	in := "blades:\n- name: b\n  blade:\n    server: b.local:8081\n    cert:\n      certificate-authority: ca.pem\n      client-certificate: client.pem\n      client-key: " +
		filepath.Join(dir, "client-key.pem") + "\n"
	cfg, warnings, err := ImportBladectlConfig([]byte(in), filepath.Join(dir, "config.yaml"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cfg.Lookup("b")
	want := clientconfig.Blade{Server: "b.local:8081", CertificateAuthority: filepath.Join(dir, "ca.pem"),
		ClientCertificate: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(warnings) != 3 || !strings.Contains(warnings[0].String(), "the old bladectl never read certificate files") {
		t.Errorf("warnings: %v", warnings)
	}
}

// TestImportRefuses: nothing that would lose mutual TLS or hide a broken
// certificate is imported; every error names the blade, key and line.
func TestImportRefuses(t *testing.T) {
	c := newCreds(t)
	other := newCreds(t)
	entry := func(server, cert string) string {
		return "blades:\n- name: b\n  blade:\n    server: " + server + "\n" + cert
	}
	full := func(ca, cert, key []byte) string {
		return "    cert:\n      certificate-authority-data: " + b64(ca) + "\n      client-certificate-data: " + b64(cert) + "\n      client-key-data: " + b64(key) + "\n"
	}
	cases := map[string]struct {
		in   string
		opts ImportOptions
		want []string
	}{
		"truncated": {
			in:   "blades:\n- name: b\n  blade: {server: b:1, cert: {client-key-data: abc",
			want: []string{"config.yaml:3: not valid YAML"},
		},
		"foreign YAML": {
			in:   "clusters:\n- name: x\n",
			want: []string{"config.yaml: blades: missing: not the old bladectl's config"},
		},
		"kubeblade's own format": {
			in:   "apiVersion: bladectl.kubeblade.io/v1alpha1\nkind: Config\nblades: []\n",
			want: []string{"config.yaml: has apiVersion/kind: this is not the old bladectl's config"},
		},
		"certificate that does not parse": {
			in:   entry("b:8081", "    cert:\n      certificate-authority-data: "+b64([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))+"\n      client-certificate-data: "+b64(c.cert)+"\n      client-key-data: "+b64(c.key)+"\n"),
			want: []string{`config.yaml:6: blade "b".blade.cert.certificate-authority-data: certificate does not parse`},
		},
		"not PEM at all": {
			in:   entry("b:8081", full([]byte("hello"), c.cert, c.key)),
			want: []string{`config.yaml:6: blade "b".blade.cert.certificate-authority-data: no PEM certificate in it`},
		},
		"not base64": {
			in:   entry("b:8081", "    cert:\n      certificate-authority-data: '%%%'\n      client-certificate-data: x\n      client-key-data: y\n"),
			want: []string{`config.yaml:6: blade "b".blade.cert.certificate-authority-data: not base64`},
		},
		"key of another certificate": {
			in:   entry("b:8081", full(c.ca, c.cert, other.key)),
			want: []string{`config.yaml:7: blade "b".blade.cert.client-certificate-data: client certificate and key do not load`},
		},
		"incomplete cert block": {
			in: entry("b:8081", "    cert:\n      certificate-authority-data: "+b64(c.ca)+"\n      client-certificate-data: "+b64(c.cert)+"\n"),
			want: []string{`config.yaml:5: blade "b".blade.cert: has no client-key-data: the old bladectl then connected without TLS, without saying so; ` +
				"kubeblade needs all three for mutual TLS"},
		},
		"plaintext TCP": {
			in:   entry("b:8081", ""),
			want: []string{`config.yaml:4: blade "b".blade.server: b:8081 has no cert block: the old bladectl reached it without TLS`, "--skip-plaintext"},
		},
		"no port": {
			in:   entry("blade-pi1.local", ""),
			want: []string{`config.yaml:4: blade "b".blade.server: "blade-pi1.local": want host:port`},
		},
		"a name twice": {
			in:   "blades:\n- name: b\n  blade: {server: /a.sock}\n- name: b\n  blade: {server: /b.sock}\n",
			want: []string{`config.yaml:4: blades[1].name: "b" is also listed on line 2`},
		},
		"no server": {
			in:   "blades:\n- name: b\n  blade: {}\n",
			want: []string{`config.yaml:3: blade "b".blade.server: missing`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := ImportBladectlConfig([]byte(tc.in), "config.yaml", tc.opts)
			if err == nil {
				t.Fatalf("imported: %+v", cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestImportSkipPlaintext(t *testing.T) {
	c := newCreds(t)
	in := oldFile(c) + "" // two blades; add a plaintext one
	in = strings.Replace(in, "current-blade:", "    - name: plain\n      blade:\n        server: 10.0.0.9:8081\ncurrent-blade:", 1)
	cfg, warnings, err := ImportBladectlConfig([]byte(in), "config.yaml", ImportOptions{SkipPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"blade-pi1", "blade-pi2"}, cfg.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].String(), `config.yaml:14: blade "plain".blade.server: skipped: the old bladectl reached 10.0.0.9:8081 without TLS`) {
		t.Errorf("warnings: %v", warnings)
	}
}

// The old agent's bladectl config in the modes where it writes no cert
// block, byte for byte: compute-blade-agent 422cf18555ed2a7be290de6d82e7246209f73fb6
// internal/agent/api_certificates.go (EnsureUnauthenticatedBladectlConfig)
// marshals cmd/bladectl/config.NewBladectlConfig(server) with yaml.v3, the
// cert block omitted (omitempty of a zero struct): in unix mode the server
// is listen.grpc as configured (the default config's
// /tmp/compute-blade-agent.sock), in plaintext TCP mode localhost:<port>.
const (
	oldUnixModeFile = "blades:\n" +
		"    - name: blade-pi2\n" +
		"      blade:\n" +
		"        server: /tmp/compute-blade-agent.sock\n" +
		"current-blade: blade-pi2\n"
	oldPlaintextTCPModeFile = "blades:\n" +
		"    - name: blade-pi3\n" +
		"      blade:\n" +
		"        server: localhost:8081\n" +
		"current-blade: blade-pi3\n"
)

// TestImportOldAgentFilesWithoutCertBlock: the files the old agent
// writes without TLS are recognised as the old format: the socket path
// becomes a unix:// URL kubeblade can dial, and the plaintext TCP blade
// is refused, saying why.
func TestImportOldAgentFilesWithoutCertBlock(t *testing.T) {
	for name, in := range map[string]string{"unix mode": oldUnixModeFile, "plaintext TCP mode": oldPlaintextTCPModeFile} {
		if !IsOldBladectlConfig([]byte(in)) {
			t.Errorf("%s: the old agent's file is not recognised as the old format", name)
		}
	}
	cfg, warnings, err := ImportBladectlConfig([]byte(oldUnixModeFile), "config.yaml", ImportOptions{})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("unix mode: %v %v", err, warnings)
	}
	want := &clientconfig.Config{CurrentBlade: "blade-pi2", Blades: []clientconfig.NamedBlade{
		{Name: "blade-pi2", Blade: clientconfig.Blade{Server: "unix:///tmp/compute-blade-agent.sock"}},
	}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("unix mode (-want +got):\n%s", diff)
	}
	if err := cfg.Blades[0].Blade.Validate(); err != nil {
		t.Errorf("unix mode: the imported blade is unusable: %v", err)
	}
	_, _, err = ImportBladectlConfig([]byte(oldPlaintextTCPModeFile), "config.yaml", ImportOptions{})
	if err == nil || !strings.Contains(err.Error(), `config.yaml:4: blade "blade-pi3".blade.server: localhost:8081 has no cert block: the old bladectl reached it without TLS, and kubeblade's bladectl speaks TCP only with mutual TLS`) {
		t.Errorf("plaintext TCP mode: %v", err)
	}
}

func TestIsOldBladectlConfig(t *testing.T) {
	c := newCreds(t)
	kb, err := clientconfig.Marshal(clientconfig.Default())
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]bool{
		oldFile(c): true,
		string(kb): false,
		"blades:\n- name: x\n  blade:\n    server: unix:///run/kubeblade/agent.sock\n": false, // both read it alike
		"blades:\n- name: x\n  blade:\n    server: /tmp/a.sock\n    cert: {}\n":        true,
		"blades: [\n":           true,
		oldUnixModeFile:         true,
		oldPlaintextTCPModeFile: true,
		// kubeblade's keys: kubeblade's format, whatever the apiVersion.
		"blades:\n- name: x\n  blade:\n    server: b:1\n    certificate-authority-data: eA==\n": false,
	} {
		if got := IsOldBladectlConfig([]byte(in)); got != want {
			t.Errorf("IsOldBladectlConfig(%.60q) = %v", in, got)
		}
	}
}
