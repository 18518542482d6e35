package csrpolicy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/kubeblade/kubeblade/internal/pki"
)

// TestSignCopiesOnlyWhatTheUsageNeeds (issue 31, finding 8): a serving
// certificate carries no Organization, whatever the request asked for
// (on 8f44781 it copied O=system:masters); a client certificate keeps the
// one role it names.
func TestSignCopiesOnlyWhatTheUsageNeeds(t *testing.T) {
	now := time.Now()
	ca, _, err := pki.NewCA("kubeblade test CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		usage   pki.Usage
		orgs    []string
		wantOrg []string
	}{
		"serving, asking for system:masters": {pki.UsageServer, []string{"system:masters"}, nil},
		"serving, asking for a role":         {pki.UsageServer, []string{pki.OrgOperators}, nil},
		"client, its role":                   {pki.UsageClient, []string{pki.OrgViewers}, []string{pki.OrgViewers}},
	} {
		t.Run(name, func(t *testing.T) {
			req := &x509.CertificateRequest{PublicKey: &key.PublicKey, Subject: pkix.Name{CommonName: "blade-1", Organization: tc.orgs},
				DNSNames: []string{"blade-1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
			certPEM, err := Sign(ca, req, tc.usage, now, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := pki.ParseCertificate(certPEM)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cert.Subject.Organization, tc.wantOrg) || cert.Subject.CommonName != "blade-1" {
				t.Errorf("subject %v, want CN=blade-1 and O=%v", cert.Subject, tc.wantOrg)
			}
			if tc.usage == pki.UsageClient && len(cert.DNSNames)+len(cert.IPAddresses) != 0 {
				t.Errorf("a client certificate with names %v %v", cert.DNSNames, cert.IPAddresses)
			}
		})
	}
}
