package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
)

// CertificateSource is where a mutual-TLS server gets its serving
// certificate and the CAs that client certificates must chain to. Both are
// asked for on every handshake, so a renewed certificate is used without a
// restart. The standalone issuer implements it from the state directory;
// in a cluster, certificates signed through the Kubernetes CSR API will.
type CertificateSource interface {
	ServingCertificate() (*tls.Certificate, error)
	ClientCAs() (*x509.CertPool, error)
}

// Holder keeps a CertificateSource's current serving certificate and client
// CAs and swaps them together on renewal, so no handshake pairs a new
// certificate with old CAs. Sources embed it.
type Holder struct {
	mu      sync.RWMutex
	serving *tls.Certificate
	pool    *x509.CertPool
}

// Set installs a new serving certificate and client CA pool.
func (h *Holder) Set(serving *tls.Certificate, pool *x509.CertPool) {
	h.mu.Lock()
	h.serving, h.pool = serving, pool
	h.mu.Unlock()
}

// ServingCertificate implements CertificateSource.
func (h *Holder) ServingCertificate() (*tls.Certificate, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.serving, nil
}

// ClientCAs implements CertificateSource.
func (h *Holder) ClientCAs() (*x509.CertPool, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.pool, nil
}

// ServerTLSConfig is a TLS 1.3 server config that requires a client
// certificate verified against src's CAs. There is deliberately no way to
// make client certificates optional.
func ServerTLSConfig(src CertificateSource) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, err := src.ServingCertificate()
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		pool, err := src.ClientCAs()
		if err != nil {
			return nil, fmt.Errorf("client CAs: %w", err)
		}
		return &tls.Config{
			MinVersion:   tls.VersionTLS13,
			NextProtos:   []string{"h2"},
			Certificates: []tls.Certificate{*cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		}, nil
	}
	return base
}

// ClientTLSConfig is a TLS 1.3 client config presenting the client key pair
// and trusting only caPEM. serverName overrides the name checked against
// the server certificate (empty: the dialled host).
func ClientTLSConfig(caPEM []byte, client KeyPair, serverName string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate found")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: serverName}
	if len(client.CertPEM) > 0 || len(client.KeyPEM) > 0 {
		pair, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
