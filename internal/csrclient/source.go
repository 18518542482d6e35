package csrclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/kubeblade/kubeblade/internal/atomicfile"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// Files in Options.Dir; named apart from the standalone issuer's, which
// may share the state directory.
const (
	ServingCert = "cluster-serving.crt"
	ServingKey  = "cluster-serving.key"
	CABundle    = "cluster-ca.crt"
)

// NodeAddresses returns a Node's InternalIP and ExternalIP addresses.
func NodeAddresses(ctx context.Context, nodes NodeAPI, name string) ([]net.IP, error) {
	n, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil && !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out, nil
}

// Options configure a Source.
type Options struct {
	// CSRs is where the serving certificate is requested.
	CSRs CSRAPI
	// Nodes reads this blade's Node (for its addresses).
	Nodes NodeAPI
	// Dir is the agent's state directory (a hostPath).
	Dir string
	// NodeName is this blade's Node; the certificate names it.
	NodeName string
	// Addresses are the IPs the certificate covers (default: the Node's
	// InternalIP and ExternalIP addresses, the only ones the operator
	// approves besides loopback).
	Addresses func() ([]net.IP, error)
	// Lifetime asks for a certificate lifetime (zero: the signer's default).
	Lifetime time.Duration
	// Timeout bounds one request (default 5 minutes).
	Timeout time.Duration
	Clock   clock.WithTicker
	Logger  *slog.Logger
}

// Source is the agent's pki.CertificateSource in a cluster: a serving
// certificate signed through the CSR API, renewed before it expires, and
// the operator's CA bundle to verify clients with.
type Source struct {
	o Options
	pki.Holder

	mu       sync.RWMutex
	renewAt  time.Time
	notAfter time.Time
}

var _ pki.CertificateSource = (*Source)(nil)

// New loads the certificate from Dir, requesting a new one when it is
// missing, due for renewal or no longer covers the blade's names.
func New(ctx context.Context, o Options) (*Source, error) {
	if o.CSRs == nil || o.Nodes == nil || o.Dir == "" || o.NodeName == "" {
		return nil, errors.New("csrclient: CSRs, Nodes, Dir and NodeName are required")
	}
	if o.Addresses == nil {
		o.Addresses = func() ([]net.IP, error) { return NodeAddresses(ctx, o.Nodes, o.NodeName) }
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	s := &Source{o: o}
	if err := s.Ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// NotAfter is when the current certificate expires.
func (s *Source) NotAfter() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.notAfter
}

// Run renews the certificate when two thirds of its life have passed,
// retrying failures with a growing delay, until ctx ends. The current
// certificate stays in use meanwhile.
func (s *Source) Run(ctx context.Context) error {
	retry := 10 * time.Second
	for {
		s.mu.RLock()
		wait := s.renewAt.Sub(s.o.Clock.Now())
		s.mu.RUnlock()
		if wait > 0 {
			t := s.o.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
		if err := s.Ensure(ctx); err != nil {
			s.o.Logger.Error("certificate renewal failed; will retry", "err", err, "in", retry)
			t := s.o.Clock.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
			retry = min(2*retry, 10*time.Minute)
			continue
		}
		retry = 10 * time.Second
	}
}

func (s *Source) sans() ([]string, []net.IP, error) {
	ips, err := s.o.Addresses()
	if err != nil {
		return nil, nil, fmt.Errorf("interface addresses: %w", err)
	}
	return []string{s.o.NodeName, "localhost"}, append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...), nil
}

// Ensure requests a new certificate if the stored one will not do, and
// loads the result.
func (s *Source) Ensure(ctx context.Context) error {
	if err := os.MkdirAll(s.o.Dir, 0o700); err != nil {
		return err
	}
	dns, ips, err := s.sans()
	if err != nil {
		return err
	}
	certPEM, keyPEM, caPEM, reason := s.load(dns, ips)
	if reason != "" {
		s.o.Logger.Info("requesting a serving certificate through the Kubernetes CSR API", "reason", reason)
		ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		iss, err := Obtain(ctx, s.o.CSRs, Request{
			Name: "kubeblade-agent-" + s.o.NodeName, SignerName: SignerAgentServing, CommonName: s.o.NodeName,
			DNSNames: dns, IPAddresses: ips, Lifetime: s.o.Lifetime,
		}, nil)
		if err != nil {
			return err
		}
		// Key first: a crash in between leaves a mismatched pair, which
		// the next start detects and replaces.
		for _, f := range []struct {
			name string
			data []byte
			mode fs.FileMode
		}{{ServingKey, iss.KeyPEM, 0o600}, {ServingCert, iss.CertPEM, 0o644}, {CABundle, iss.CAPEM, 0o644}} {
			if err := atomicfile.Write(filepath.Join(s.o.Dir, f.name), f.data, f.mode); err != nil {
				return err
			}
		}
		s.o.Logger.Info("obtained a serving certificate", "csr", iss.CSRName, "notAfter", iss.NotAfter)
		certPEM, keyPEM, caPEM = iss.CertPEM, iss.KeyPEM, iss.CAPEM
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no CA certificate in " + CABundle)
	}
	s.Set(&pair, pool)
	s.mu.Lock()
	s.renewAt, s.notAfter = pki.RenewalTime(pair.Leaf), pair.Leaf.NotAfter
	s.mu.Unlock()
	return nil
}

// load returns the stored files, or why a new certificate is needed.
func (s *Source) load(dns []string, ips []net.IP) (certPEM, keyPEM, caPEM []byte, reason string) {
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(s.o.Dir, n))
		if err != nil {
			return nil
		}
		return b
	}
	certPEM, keyPEM, caPEM = read(ServingCert), read(ServingKey), read(CABundle)
	if certPEM == nil || keyPEM == nil || caPEM == nil {
		return nil, nil, nil, "no certificate yet"
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, nil, "stored key pair unusable: " + err.Error()
	}
	c := pair.Leaf
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: s.o.Clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, nil, nil, "stored certificate does not verify: " + err.Error()
	}
	if pki.NeedsRenewal(c, s.o.Clock.Now()) {
		return nil, nil, nil, "less than a third of its lifetime remains"
	}
	for _, d := range dns {
		if !slices.Contains(c.DNSNames, d) {
			return nil, nil, nil, "does not cover " + d
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return nil, nil, nil, "does not cover " + ip.String()
		}
	}
	return certPEM, keyPEM, caPEM, ""
}
