package csrpolicy

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"

	"github.com/kubeblade/kubeblade/internal/pki"
)

// backdate absorbs clock skew between the operator and the certificate's users.
const backdate = 5 * time.Minute

// Sign issues a certificate for req's key, valid from now for lifetime and
// never beyond the CA. Only the subject's common name and, for clients, its
// organizations (the role, package pki) and, for servers, the DNS names and
// IPs are copied from the request. A serving certificate carries no
// Organization: it needs none, and one copied from the request
// (O=system:masters) would be a group to any verifier that reads it as one.
func Sign(ca *pki.CA, req *x509.CertificateRequest, usage pki.Usage, now time.Time, lifetime time.Duration) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.Subject.CommonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	if _, ok := req.PublicKey.(*rsa.PublicKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	switch usage {
	case pki.UsageServer:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames, tmpl.IPAddresses = req.DNSNames, req.IPAddresses
	default:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.Subject.Organization = req.Subject.Organization
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
