package standalone

import (
	"bytes"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/pki"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newIssuer(t *testing.T, dir string, clk *clocktesting.FakeClock, extra ...string) *Issuer {
	t.Helper()
	i, err := New(Options{
		Dir: dir, Hostname: "blade1", ExtraSANs: extra, Port: 8081, SocketPath: "/run/kubeblade/agent.sock", Clock: clk,
		Addresses: func() ([]net.IP, error) { return []net.IP{net.ParseIP("192.168.1.21")}, nil },
		// bladectl's format, as agentd gives it.
		ClientConfig: func(a Admin) ([]byte, error) {
			return clientconfig.ForAdmin(a.Host, a.ServerHost, a.Port, a.SocketPath, a.CAPEM, a.Client.CertPEM, a.Client.KeyPEM)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFirstStartCreatesEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	i := newIssuer(t, dir, clocktesting.NewFakeClock(epoch), "blade1.lan", "10.9.9.9")
	modes := map[string]os.FileMode{
		CAKey: 0o600, ServerKey: 0o600, AdminKey: 0o600, BladectlFile: 0o600,
		CACert: 0o644, ServerCert: 0o644, AdminCert: 0o644,
	}
	for name, want := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", name, fi.Mode().Perm(), want)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %o", fi.Mode().Perm())
	}
	sc, err := i.ServingCertificate()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.ParseCertificate(read(t, dir, ServerCert))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sc.Certificate[0], leaf.Raw) {
		t.Error("served certificate is not the stored one")
	}
	for _, n := range []string{"blade1", "blade1.lan", "localhost"} {
		if !slices.Contains(leaf.DNSNames, n) {
			t.Errorf("serving certificate lacks DNS name %s: %v", n, leaf.DNSNames)
		}
	}
	for _, ip := range []string{"192.168.1.21", "10.9.9.9", "127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(ip); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}

	cfg, exists, err := clientconfig.Load(i.BladectlConfigPath())
	if err != nil || !exists {
		t.Fatalf("bladectl config: %v %v", exists, err)
	}
	b, ok := cfg.Lookup(cfg.CurrentBlade)
	if cfg.CurrentBlade != "blade1" || !ok || b.Server != "blade1:8081" || b.Validate() != nil {
		t.Fatalf("bladectl config: %+v", cfg)
	}
	caPEM, admin, err := b.Credentials("")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caPEM, read(t, dir, CACert)) || !bytes.Equal(admin.CertPEM, read(t, dir, AdminCert)) {
		t.Error("bladectl config does not carry the CA and admin certificate")
	}
	if local, ok := cfg.Lookup("blade1-local"); !ok || local.Server != "unix:///run/kubeblade/agent.sock" {
		t.Errorf("local entry: %+v", local)
	}
	pool, _ := i.ClientCAs()
	adminCert, _ := pki.ParseCertificate(admin.CertPEM)
	if _, err := adminCert.Verify(verifyClient(pool, epoch)); err != nil {
		t.Errorf("admin certificate does not verify against the client CAs: %v", err)
	}
}

func TestRestartReusesAndRenewsBeforeExpiry(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(epoch)
	newIssuer(t, dir, clk)
	ca, server, admin := read(t, dir, CACert), read(t, dir, ServerCert), read(t, dir, AdminCert)
	cfg := read(t, dir, BladectlFile)

	newIssuer(t, dir, clk)
	if !bytes.Equal(server, read(t, dir, ServerCert)) || !bytes.Equal(admin, read(t, dir, AdminCert)) || !bytes.Equal(cfg, read(t, dir, BladectlFile)) {
		t.Fatal("a restart reissued valid certificates")
	}

	// Past two thirds of the leaf lifetime: leaves renew, the CA stays.
	clk.Step(pki.LeafLifetime * 2 / 3)
	i := newIssuer(t, dir, clk)
	if bytes.Equal(server, read(t, dir, ServerCert)) || bytes.Equal(admin, read(t, dir, AdminCert)) {
		t.Fatal("certificates not renewed")
	}
	if !bytes.Equal(ca, read(t, dir, CACert)) {
		t.Fatal("CA replaced while valid")
	}
	if bytes.Equal(cfg, read(t, dir, BladectlFile)) {
		t.Fatal("bladectl config still holds the old admin certificate")
	}

	// Ensure (what Run calls periodically) renews a running issuer.
	server = read(t, dir, ServerCert)
	clk.Step(pki.LeafLifetime * 2 / 3)
	if err := i.Ensure(); err != nil {
		t.Fatal(err)
	}
	sc, _ := i.ServingCertificate()
	if bytes.Equal(server, read(t, dir, ServerCert)) {
		t.Fatal("Ensure did not renew")
	}
	if leaf, _ := pki.ParseCertificate(read(t, dir, ServerCert)); !bytes.Equal(sc.Certificate[0], leaf.Raw) {
		t.Fatal("renewed certificate not served")
	}

	// Near the CA's expiry everything is replaced.
	clk.Step(pki.CALifetime * 2 / 3)
	newIssuer(t, dir, clk)
	if bytes.Equal(ca, read(t, dir, CACert)) {
		t.Fatal("CA not renewed")
	}
}

func TestNewNamesReissueServingCertificate(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(epoch)
	newIssuer(t, dir, clk)
	server := read(t, dir, ServerCert)
	newIssuer(t, dir, clk, "blade1.example.org")
	leaf, _ := pki.ParseCertificate(read(t, dir, ServerCert))
	if bytes.Equal(server, read(t, dir, ServerCert)) || !slices.Contains(leaf.DNSNames, "blade1.example.org") {
		t.Fatalf("extra SAN not added: %v", leaf.DNSNames)
	}
}

func TestBrokenFilesAreReplaced(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(epoch)
	newIssuer(t, dir, clk)
	if err := os.WriteFile(filepath.Join(dir, ServerKey), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	i := newIssuer(t, dir, clk)
	if sc, err := i.ServingCertificate(); err != nil || sc == nil {
		t.Fatalf("serving certificate: %v", err)
	}
}

func verifyClient(pool *x509.CertPool, at time.Time) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}
