package testregistry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/testwait"
)

func TestStartServesTheDistributionAPI(t *testing.T) {
	r := Start(t, Options{})
	resp, err := http.Get("http://" + r.Host + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v2/: %s, want 200", resp.Status)
	}
	if got := resp.Header.Get("Docker-Distribution-API-Version"); got != "registry/2.0" {
		t.Errorf("Docker-Distribution-API-Version %q, want registry/2.0", got)
	}
}

func TestStartWithHtpasswdRefusesAnonymousRequests(t *testing.T) {
	r := Start(t, Options{Htpasswd: TestHtpasswd})
	for user, want := range map[string]int{"": http.StatusUnauthorized, TestUser: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.Host+"/v2/", nil)
		if user != "" {
			req.SetBasicAuth(user, TestPassword)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("user %q: %s, want %d", user, resp.Status, want)
		}
	}
}

// TestConfigWithTLSServesHTTPS: a configuration with a certificate and key
// makes the registry serve HTTPS with them, as the real-kubelet suites run
// it (their own process supervision, this configuration).
func TestConfigWithTLSServesHTTPS(t *testing.T) {
	bin := Binary(t)
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Root: filepath.Join(dir, "storage"), Addr: addr, TLSCert: filepath.Join(dir, "tls.crt"), TLSKey: filepath.Join(dir, "tls.key")}
	for f, b := range map[string][]byte{
		c.TLSCert:                          pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		c.TLSKey:                           pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		filepath.Join(dir, "registry.yml"): []byte(c.YAML()),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "registry.yml"))
	cmd.Env = append(os.Environ(), ProcessEnv...)
	out, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); out.Close() })
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	hc := &http.Client{Transport: tr}
	testwait.Eventually(t, time.Minute, "the registry to answer over HTTPS", func(ctx context.Context) (bool, string) {
		return Answers(ctx, hc, "https://"+addr)
	})
	if ok, why := Answers(t.Context(), http.DefaultClient, "http://"+addr); ok {
		t.Errorf("the TLS registry answered plain HTTP too: %s", why)
	}
}
