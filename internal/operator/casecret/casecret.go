// Package casecret is the format of the Secret that holds the operator's
// certificate authority: which keys hold the signing CA and the trust
// bundle, how to read it, and how to put a new CA into it while the
// previous ones stay trusted until they expire. The CA rotation controller
// writes it and the CSR signer reads it; neither needs the other.
package casecret

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/internal/pki"
)

const (
	// DefaultName is the Secret holding the CA.
	DefaultName = "kubeblade-ca"
	// KeyBundle holds every CA certificate still trusted, newest first.
	KeyBundle = "ca.crt"
	// CommonName of the CA certificates.
	CommonName = "kubeblade-operator-ca"
)

// Authority is the CA that signs and the certificates clients should trust.
type Authority struct {
	CA *pki.CA
	// BundlePEM is every CA certificate still trusted, the signing one first.
	BundlePEM []byte
}

// Load reads the Authority from its Secret.
func Load(ctx context.Context, c client.Reader, key types.NamespacedName) (*Authority, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, err
	}
	return Parse(s)
}

// Parse reads the Authority from a Secret already fetched.
func Parse(s *corev1.Secret) (*Authority, error) {
	ca, err := pki.LoadCA(pki.KeyPair{CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey]})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	bundle := s.Data[KeyBundle]
	if len(bundle) == 0 {
		bundle = s.Data[corev1.TLSCertKey]
	}
	return &Authority{CA: ca, BundlePEM: bundle}, nil
}

// New returns an empty CA Secret named key, to Fill and create.
func New(key types.NamespacedName) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "kubeblade", "app.kubernetes.io/component": "ca"}},
		Type: corev1.SecretTypeTLS,
	}
}

// Fill puts a new CA valid from now for lifetime (pki.CALifetime if zero)
// into s, followed in the bundle by the certificates of oldBundle that have
// not expired, and returns when the new CA expires.
func Fill(s *corev1.Secret, oldBundle []byte, now time.Time, lifetime time.Duration) (time.Time, error) {
	ca, kp, err := pki.NewCA(CommonName, now, lifetime)
	if err != nil {
		return time.Time{}, err
	}
	bundle := bytes.Clone(kp.CertPEM)
	for rest := oldBundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil || !now.Before(c.NotAfter) {
			continue
		}
		bundle = append(bundle, pem.EncodeToMemory(b)...)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[corev1.TLSCertKey] = kp.CertPEM
	s.Data[corev1.TLSPrivateKeyKey] = kp.KeyPEM
	s.Data[KeyBundle] = bundle
	return ca.Cert.NotAfter, nil
}
