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

	"github.com/kubeblade/kubeblade/internal/pki"
)

// Signer names of kubeblade's Kubernetes contract.
const (
	SignerAgentServing = "kubeblade.io/agent-serving"
	SignerClient       = "kubeblade.io/client"
	// NodeNameExtra and NodeUIDExtra are the user-info extras the API
	// server sets from a ServiceAccount token bound to a pod: the pod's Node.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
	NodeUIDExtra  = "authentication.kubernetes.io/node-uid"
	// MaxSANs caps the alternative names of an agent's serving
	// certificate: its Node name, localhost, the two loopback addresses
	// and its Node's addresses fit many times over.
	MaxSANs = 16
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
// ServiceAccount, for the requester's own Node (common name and DNS names;
// the Node's UID when the token names one), at most MaxSANs names, and as
// IPs only loopback and addresses its Node reports that no other Node
// reports. The addresses are what the kubelet wrote into the Node's status:
// the agent itself cannot change them (config/admission). It returns the
// Node name. node is nil when the Node does not exist; others are all
// Nodes (the requester's own among them is skipped).
func ValidateAgentServing(c *certv1.CertificateSigningRequest, req *x509.CertificateRequest, agentUser string, node *corev1.Node, others []corev1.Node) (string, error) {
	name, err := RequesterNode(c, agentUser)
	if err != nil {
		return "", err
	}
	if uids := c.Spec.Extra[NodeUIDExtra]; node != nil && len(uids) == 1 && uids[0] != string(node.UID) {
		return name, fmt.Errorf("the requester's token is for node %s with UID %s, not the current one (%s)", name, uids[0], node.UID)
	}
	if req.Subject.CommonName != name {
		return name, fmt.Errorf("common name %q is not the requester's node %q", req.Subject.CommonName, name)
	}
	if n := len(req.DNSNames) + len(req.IPAddresses); n > MaxSANs {
		return name, fmt.Errorf("%d alternative names; at most %d are signed", n, MaxSANs)
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
		if ip.IsLoopback() {
			continue
		}
		if !nodeHasIP(node, ip) {
			return name, fmt.Errorf("IP address %s is not an address of node %s", ip, name)
		}
		for i := range others {
			if others[i].Name != name && nodeHasIP(&others[i], ip) {
				return name, fmt.Errorf("IP address %s is also an address of node %s: no blade gets a certificate for an address another Node reports", ip, others[i].Name)
			}
		}
	}
	if err := checkUsages(c.Spec.Usages, certv1.UsageServerAuth); err != nil {
		return name, err
	}
	return name, nil
}

// ValidateClient checks a client request: a common name, exactly one role
// as the Organization (the agents' gRPC API reads it: package pki), no
// alternative names, client usages only.
func ValidateClient(c *certv1.CertificateSigningRequest, req *x509.CertificateRequest) error {
	if req.Subject.CommonName == "" {
		return errors.New("a client certificate needs a common name")
	}
	if o := req.Subject.Organization; len(o) != 1 || (o[0] != pki.OrgViewers && o[0] != pki.OrgOperators) {
		return fmt.Errorf("a client certificate names exactly one role as its Organization, %s or %s, not %q",
			pki.OrgViewers, pki.OrgOperators, o)
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
