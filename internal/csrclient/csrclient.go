// Package csrclient gets certificates through the Kubernetes
// CertificateSigningRequest API, with the key made and kept on this
// machine: the agent's serving certificate (signer
// kubeblade.io/agent-serving, approved and signed by kubeblade-operator)
// and a person's client certificate (kubeblade.io/client, approved with
// `kubectl certificate approve`). The operator returns the issued
// certificate followed by its CA bundle, which becomes the trust anchors.
package csrclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// CSRAPI is the part of the CertificateSigningRequest API csrclient uses;
// client-go's typed CertificateSigningRequestInterface and kubeclient.CSRClient both satisfy it.
type CSRAPI interface {
	Create(ctx context.Context, csr *certv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certv1.CertificateSigningRequest, error)
	List(ctx context.Context, opts metav1.ListOptions) (*certv1.CertificateSigningRequestList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NodeAPI reads Nodes; client-go's typed NodeInterface and kubeclient.NodeClient satisfy it.
type NodeAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// Signer names (the operator's csr package defines the same).
const (
	SignerAgentServing = "kubeblade.io/agent-serving"
	SignerClient       = "kubeblade.io/client"
)

// Request describes a certificate to ask for.
type Request struct {
	// Name of the CSR object; a suffix derived from the key is appended so
	// each new key gets a new request.
	Name       string
	SignerName string
	CommonName string
	// Organization of the subject (client certificates).
	Organization []string
	DNSNames     []string
	IPAddresses  []net.IP
	// Lifetime asks for spec.expirationSeconds (zero: the signer's default).
	Lifetime time.Duration
}

// Issued is what Obtain returns: the certificate, its new private key and
// the CA certificates the signer says to trust, all PEM.
type Issued struct {
	CSRName  string
	CertPEM  []byte
	KeyPEM   []byte
	CAPEM    []byte
	NotAfter time.Time
}

// Submit makes a new key and sends a CSR for it, returning the key and
// the CSR's name and UID. Nothing is waited for.
func Submit(ctx context.Context, csrs CSRAPI, r Request) (keyPEM []byte, name string, uid string, key *ecdsa.PrivateKey, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", "", nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: r.CommonName, Organization: r.Organization},
		DNSNames:    r.DNSNames,
		IPAddresses: r.IPAddresses,
	}, key)
	if err != nil {
		return nil, "", "", nil, err
	}
	usages := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	if r.SignerName == SignerAgentServing {
		usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	}
	pkDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, "", "", nil, err
	}
	sum := sha256.Sum256(pkDER)
	name = strings.TrimSuffix(r.Name, "-") + "-" + hex.EncodeToString(sum[:5])
	obj := &certv1.CertificateSigningRequest{
		// The API server fills in the requester (username, UID, groups).
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: r.SignerName,
			Usages:     usages,
		},
	}
	if r.Lifetime > 0 {
		secs := int32(r.Lifetime / time.Second)
		obj.Spec.ExpirationSeconds = &secs
	}
	reqName, reqUID, err := create(ctx, csrs, obj, key)
	if err != nil {
		return nil, "", "", nil, fmt.Errorf("creating CertificateSigningRequest %s: %w", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, "", "", nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), reqName, string(reqUID), key, nil
}

// Obtain submits a request and waits (until ctx ends) for the certificate.
// waiting, if set, is told the CSR's name once it exists (for "approve it
// with kubectl certificate approve NAME").
func Obtain(ctx context.Context, csrs CSRAPI, r Request, waiting func(csrName string)) (*Issued, error) {
	keyPEM, name, uid, _, err := Submit(ctx, csrs, r)
	if err != nil {
		return nil, err
	}
	if waiting != nil {
		waiting(name)
	}
	data, err := waitForCertificate(ctx, csrs, name, types.UID(uid))
	if err != nil {
		return nil, fmt.Errorf("waiting for CertificateSigningRequest %s: %w", name, err)
	}
	leaf, bundle, err := SplitChain(data)
	if err != nil {
		return nil, fmt.Errorf("CertificateSigningRequest %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(mustDecode(leaf))
	if err != nil {
		return nil, err
	}
	if len(bundle) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(bundle)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return nil, fmt.Errorf("issued certificate does not chain to the returned CA bundle: %w", err)
		}
	}
	return &Issued{CSRName: name, CertPEM: leaf, KeyPEM: keyPEM, CAPEM: bundle, NotAfter: cert.NotAfter}, nil
}

// SplitChain splits a CSR's status.certificate into the issued certificate
// (the first) and the rest, the CA bundle.
func SplitChain(data []byte) (leaf, bundle []byte, err error) {
	var blocks [][]byte
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			blocks = append(blocks, pem.EncodeToMemory(b))
		}
	}
	if len(blocks) == 0 {
		return nil, nil, errors.New("no certificate issued")
	}
	for _, b := range blocks[1:] {
		bundle = append(bundle, b...)
	}
	return blocks[0], bundle, nil
}

func mustDecode(p []byte) []byte {
	b, _ := pem.Decode(p)
	if b == nil {
		return nil
	}
	return b.Bytes
}
