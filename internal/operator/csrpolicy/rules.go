// Package csrpolicy is what kubeblade's CertificateSigningRequest signer
// names accept and what they issue: parsing a request, checking an agent's
// serving request against the requester's own Node, checking a client
// request, and signing the certificate. The csrapprover and csrsigner
// controllers both apply it (the signer checks again, so a mistaken manual
// approval cannot give an agent a certificate for another Node). Client
// certificates (kubeblade.io/client) are never approved automatically: a
// person approves them with `kubectl certificate approve`.
package csrpolicy

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// Signer names of kubeblade's Kubernetes contract.
const (
	SignerAgentServing = "kubeblade.io/agent-serving"
	SignerClient       = "kubeblade.io/client"
	// NodeNameExtra is the user-info extra the API server sets from a
	// ServiceAccount token bound to a pod: the pod's Node.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
)

// ParseRequest decodes the PKCS#10 request of a CSR and checks its
// signature and key.
func ParseRequest(c *certv1.CertificateSigningRequest) (*x509.CertificateRequest, error) {
	b, _ := pem.Decode(c.Spec.Request)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("spec.request holds no PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("request signature: %w", err)
	}
	switch k := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize < 256 {
			return nil, errors.New("ECDSA key below P-256")
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, errors.New("RSA key below 2048 bits")
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return req, nil
}

// RequesterNode returns the Node an agent's request comes from: the
// requester must be the agent ServiceAccount and carry exactly one
// node-name extra.
func RequesterNode(c *certv1.CertificateSigningRequest, agentUser string) (string, error) {
	if c.Spec.Username != agentUser {
		return "", fmt.Errorf("requester %q is not the agent ServiceAccount %q", c.Spec.Username, agentUser)
	}
	nodes := c.Spec.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return "", fmt.Errorf("the requester's token names no node (%s); agents need a pod-bound ServiceAccount token", NodeNameExtra)
	}
	return nodes[0], nil
}

// ValidateAgentServing checks an agent serving request: from the agent
// ServiceAccount, for the requester's own Node (common name and DNS names),
// only its addresses and loopback as IPs, server usages only. It returns
// the Node name.
func ValidateAgentServing(c *certv1.CertificateSigningRequest, req *x509.CertificateRequest, agentUser string, node *corev1.Node) (string, error) {
	name, err := RequesterNode(c, agentUser)
	if err != nil {
		return "", err
	}
	if req.Subject.CommonName != name {
		return name, fmt.Errorf("common name %q is not the requester's node %q", req.Subject.CommonName, name)
	}
	for _, d := range req.DNSNames {
		if d != name && d != "localhost" {
			return name, fmt.Errorf("DNS name %q is not the node's name or localhost", d)
		}
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return name, errors.New("email and URI names are not allowed")
	}
	for _, ip := range req.IPAddresses {
		if !ip.IsLoopback() && !nodeHasIP(node, ip) {
			return name, fmt.Errorf("IP address %s is not an address of node %s", ip, name)
		}
	}
	if err := checkUsages(c.Spec.Usages, certv1.UsageServerAuth); err != nil {
		return name, err
	}
	return name, nil
}

// ValidateClient checks a client request: a common name, no alternative
// names, client usages only.
func ValidateClient(c *certv1.CertificateSigningRequest, req *x509.CertificateRequest) error {
	if req.Subject.CommonName == "" {
		return errors.New("a client certificate needs a common name")
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return errors.New("a client certificate has no alternative names")
	}
	return checkUsages(c.Spec.Usages, certv1.UsageClientAuth)
}

func checkUsages(usages []certv1.KeyUsage, required certv1.KeyUsage) error {
	if !slices.Contains(usages, required) {
		return fmt.Errorf("usages must include %q", required)
	}
	for _, u := range usages {
		if u != required && u != certv1.UsageDigitalSignature && u != certv1.UsageKeyEncipherment {
			return fmt.Errorf("usage %q is not allowed", u)
		}
	}
	return nil
}

func nodeHasIP(node *corev1.Node, ip net.IP) bool {
	if node == nil {
		return false
	}
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if p := net.ParseIP(a.Address); p != nil && p.Equal(ip) {
			return true
		}
	}
	return false
}

// Approved and Denied/Failed report the CSR's conditions.
func Approved(c *certv1.CertificateSigningRequest) bool {
	return hasCondition(c, certv1.CertificateApproved)
}

// Finished reports a CSR nobody should act on any more.
func Finished(c *certv1.CertificateSigningRequest) bool {
	return len(c.Status.Certificate) > 0 || hasCondition(c, certv1.CertificateDenied) || hasCondition(c, certv1.CertificateFailed)
}

func hasCondition(c *certv1.CertificateSigningRequest, t certv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
