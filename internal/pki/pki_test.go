package pki

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestIssuedCertificatesVerify(t *testing.T) {
	ca, caKP, err := NewCA("test CA", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := LoadCA(caKP); err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("LoadCA: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cases := map[string]struct {
		req   Request
		usage x509.ExtKeyUsage
		name  string
	}{
		"server by name": {Request{CommonName: "blade1", Usage: UsageServer, DNSNames: []string{"blade1"}}, x509.ExtKeyUsageServerAuth, "blade1"},
		"server by IP":   {Request{CommonName: "blade1", Usage: UsageServer, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}}, x509.ExtKeyUsageServerAuth, "10.0.0.7"},
		"client":         {Request{CommonName: "admin", Usage: UsageClient}, x509.ExtKeyUsageClientAuth, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kp, err := ca.Issue(tc.req, now)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := ParseCertificate(kp.CertPEM)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.name, KeyUsages: []x509.ExtKeyUsage{tc.usage}, CurrentTime: now})
			if err != nil {
				t.Fatal(err)
			}
			// The other usage must not verify: a client certificate is no
			// serving certificate and vice versa.
			other := x509.ExtKeyUsageClientAuth
			if tc.usage == other {
				other = x509.ExtKeyUsageServerAuth
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{other}, CurrentTime: now}); err == nil {
				t.Error("verified for the wrong usage")
			}
			if got := cert.NotAfter.Sub(cert.NotBefore); got != LeafLifetime {
				t.Errorf("lifetime = %v", got)
			}
		})
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	ca, _, err := NewCA("short CA", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(Request{CommonName: "x", Usage: UsageClient}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := ParseCertificate(kp.CertPEM)
	if cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Fatalf("leaf expires %v after CA %v", cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestNeedsRenewalAtTwoThirds(t *testing.T) {
	c := &x509.Certificate{NotBefore: now, NotAfter: now.Add(300 * time.Hour)}
	cases := map[time.Duration]bool{0: false, 199 * time.Hour: false, 200 * time.Hour: true, 400 * time.Hour: true}
	for at, want := range cases {
		if got := NeedsRenewal(c, now.Add(at)); got != want {
			t.Errorf("NeedsRenewal at +%v = %v, want %v", at, got, want)
		}
	}
}

func TestLoadCARejectsLeaf(t *testing.T) {
	ca, _, err := NewCA("CA", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(Request{CommonName: "leaf", Usage: UsageClient}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(kp); err == nil {
		t.Fatal("a leaf loaded as CA")
	}
}
