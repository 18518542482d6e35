// Package pki creates the small certificate authority a standalone agent
// uses for its mutual-TLS listener: a CA, serving and client certificates,
// and the renewal rule. It knows nothing about files or where certificates
// come from; see package pki/standalone for that.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Lifetimes of what New and Issue create. Leaf certificates are short
// enough that a lost key expires within the year; the CA outlives many
// leaf renewals so client configs stay valid.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	LeafLifetime = 365 * 24 * time.Hour
	// backdate absorbs clock skew between the agent and its clients.
	backdate = 5 * time.Minute
)

// Usage says what a leaf certificate is for.
type Usage int

const (
	UsageServer Usage = iota
	UsageClient
)

// CA is a certificate authority with its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// KeyPair is a PEM-encoded certificate and private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Request describes a leaf certificate.
type Request struct {
	CommonName   string
	Organization []string
	Usage        Usage
	DNSNames     []string
	IPAddresses  []net.IP
	// NotBefore defaults to now (minus a few minutes for clock skew).
	NotBefore time.Time
	// Lifetime defaults to LeafLifetime.
	Lifetime time.Duration
}

// NewCA creates a self-signed CA valid for lifetime (CALifetime if zero)
// from now.
func NewCA(commonName string, now time.Time, lifetime time.Duration) (*CA, KeyPair, error) {
	if lifetime <= 0 {
		lifetime = CALifetime
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, KeyPair{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"kubeblade"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, KeyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, KeyPair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, KeyPair{}, err
	}
	return &CA{Cert: cert, Key: key}, KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadCA parses a CA from PEM.
func LoadCA(kp KeyPair) (*CA, error) {
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("certificate is not a CA")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("CA key cannot sign")
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// Issue creates a key and a certificate for r, signed by the CA. The
// certificate never outlives the CA.
func (ca *CA) Issue(r Request, now time.Time) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return KeyPair{}, err
	}
	if r.Lifetime <= 0 {
		r.Lifetime = LeafLifetime
	}
	notBefore := r.NotBefore
	if notBefore.IsZero() {
		notBefore = now.Add(-backdate)
	}
	notAfter := notBefore.Add(r.Lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		Subject:        pkix.Name{CommonName: r.CommonName, Organization: r.Organization},
		NotBefore:      notBefore,
		NotAfter:       notAfter,
		KeyUsage:       x509.KeyUsageDigitalSignature,
		DNSNames:       r.DNSNames,
		IPAddresses:    r.IPAddresses,
		AuthorityKeyId: ca.Cert.SubjectKeyId,
	}
	switch r.Usage {
	case UsageServer:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case UsageClient:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return KeyPair{}, fmt.Errorf("unknown certificate usage %d", r.Usage)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return KeyPair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// NeedsRenewal reports whether cert should be replaced: less than a third
// of its lifetime remains (the rule kubelet and cert-manager use, which
// leaves room for several failed attempts before expiry).
func NeedsRenewal(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(RenewalTime(cert))
}

// RenewalTime is when NeedsRenewal starts to report true.
func RenewalTime(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-life / 3)
}

// ParseCertificate parses the first certificate of a PEM bundle.
func ParseCertificate(pemBytes []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, pemBytes = pem.Decode(pemBytes)
		if b == nil {
			return nil, errors.New("no PEM certificate found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, err := pub.Bytes()
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:20]
}
