package operator_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/operator/ca"
	"github.com/kubeblade/kubeblade/internal/operator/csr"
)

var agentRBAC sync.Once

// withAgentRBAC installs the agent's ClusterRole and binding once.
func withAgentRBAC(t *testing.T) {
	agentRBAC.Do(func() {
		applyYAML(t, k8s, "config/rbac/agent/role.yaml")
		applyYAML(t, k8s, "config/rbac/agent/role_binding.yaml")
	})
}

func newCSR(t *testing.T, cfg *rest.Config, name, signer, cn string, dns []string, ips []net.IP, usages ...certv1.KeyUsage) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, DNSNames: dns, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx(t), &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.CertificateSigningRequestSpec{
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), SignerName: signer, Usages: usages,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CSR %s: %v", name, err)
	}
}

func getCSR(t *testing.T, name string) *certv1.CertificateSigningRequest {
	c := &certv1.CertificateSigningRequest{}
	if err := k8s.Get(ctx(t), types.NamespacedName{Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func condition(c *certv1.CertificateSigningRequest) string {
	for _, cond := range c.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			return string(cond.Type)
		}
	}
	return ""
}

func caPool(t *testing.T) *x509.CertPool {
	t.Helper()
	var a *ca.Authority
	eventually(t, "the CA Secret", func() (bool, error) {
		var err error
		a, err = ca.Load(ctx(t), k8s, types.NamespacedName{Namespace: ns, Name: ca.DefaultSecretName})
		return err == nil, err
	})
	pool := x509.NewCertPool()
	pool.AddCert(a.CA.Cert)
	return pool
}

func verifyIssued(t *testing.T, c *certv1.CertificateSigningRequest, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	leaf, bundle, err := csrclient.SplitChain(c.Status.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) == 0 {
		t.Error("no CA bundle after the certificate")
	}
	b, _ := pem.Decode(leaf)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: caPool(t), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("issued certificate does not verify against the CA Secret: %v", err)
	}
	return cert
}

func TestCSRAgentServingRules(t *testing.T) {
	withAgentRBAC(t)
	n := node("csr-node-1", nil)
	createAll(t, n)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}}
	if err := k8s.Status().Update(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	agent := impersonate(t, "csr-node-1")
	serving := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}

	// Untouched: a signer that is not kubeblade's, even from the agent.
	newCSR(t, agent, "csr-other-signer", "example.com/other", "csr-node-1", nil, nil, serving...)

	cases := map[string]struct {
		cfg  *rest.Config
		cn   string
		dns  []string
		ips  []net.IP
		use  []certv1.KeyUsage
		want string
	}{
		"own node":          {agent, "csr-node-1", []string{"csr-node-1", "localhost"}, []net.IP{net.ParseIP("192.0.2.10"), net.ParseIP("127.0.0.1")}, serving, "Approved"},
		"other node name":   {agent, "csr-node-2", []string{"csr-node-2"}, nil, serving, "Denied"},
		"other node as SAN": {agent, "csr-node-1", []string{"csr-node-2"}, nil, serving, "Denied"},
		"foreign IP":        {agent, "csr-node-1", nil, []net.IP{net.ParseIP("198.51.100.7")}, serving, "Denied"},
		"client usage":      {agent, "csr-node-1", nil, nil, []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}, "Denied"},
		"not the agent":     {env.Config, "csr-node-1", nil, nil, serving, "Denied"},
	}
	names := map[string]string{}
	i := 0
	for name, tc := range cases {
		i++
		csrName := "csr-agent-" + string(rune('a'+i))
		names[name] = csrName
		newCSR(t, tc.cfg, csrName, csr.SignerAgentServing, tc.cn, tc.dns, tc.ips, tc.use...)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			eventually(t, "a decision", func() (bool, error) {
				c := getCSR(t, names[name])
				return condition(c) != "" && (condition(c) != "Approved" || len(c.Status.Certificate) > 0), nil
			})
			c := getCSR(t, names[name])
			if got := condition(c); got != tc.want {
				t.Fatalf("condition %s, want %s (%+v)", got, tc.want, c.Status.Conditions)
			}
			if tc.want == "Approved" {
				cert := verifyIssued(t, c, x509.ExtKeyUsageServerAuth)
				if cert.Subject.CommonName != "csr-node-1" || len(cert.IPAddresses) != 2 {
					t.Errorf("certificate for %s %v", cert.Subject.CommonName, cert.IPAddresses)
				}
			} else if len(c.Status.Certificate) > 0 {
				t.Error("a denied request got a certificate")
			}
		})
	}
	if c := getCSR(t, "csr-other-signer"); len(c.Status.Conditions) > 0 || len(c.Status.Certificate) > 0 {
		t.Errorf("a request for another signer was touched: %+v", c.Status)
	}
}

func TestCSRClientNeedsHumanApproval(t *testing.T) {
	client := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	newCSR(t, env.Config, "csr-client-1", csr.SignerClient, "alice", nil, nil, client...)
	// Anything the operator does to an agent request is done by now.
	newCSR(t, impersonate(t, "csr-node-1"), "csr-client-probe", csr.SignerAgentServing, "csr-node-1", nil, nil, certv1.UsageDigitalSignature, certv1.UsageServerAuth)
	eventually(t, "the probe request", func() (bool, error) { return condition(getCSR(t, "csr-client-probe")) != "", nil })
	if c := getCSR(t, "csr-client-1"); condition(c) != "" || len(c.Status.Certificate) > 0 {
		t.Fatalf("a client request was acted on without a person: %+v", c.Status)
	}

	// kubectl certificate approve.
	c := getCSR(t, "csr-client-1")
	c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove", Message: "by a person",
	})
	if err := k8s.SubResource("approval").Update(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the signed client certificate", func() (bool, error) {
		return len(getCSR(t, "csr-client-1").Status.Certificate) > 0, nil
	})
	cert := verifyIssued(t, getCSR(t, "csr-client-1"), x509.ExtKeyUsageClientAuth)
	if cert.Subject.CommonName != "alice" {
		t.Errorf("common name %q", cert.Subject.CommonName)
	}
}

func TestCSRClientAgentSource(t *testing.T) {
	withAgentRBAC(t)
	n := node("csr-agent-node", nil)
	createAll(t, n)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.20"}}
	if err := k8s.Status().Update(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cs := kubernetes.NewForConfigOrDie(impersonate(t, "csr-agent-node"))
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := csrclient.New(c, csrclient.Options{CSRs: cs.CertificatesV1().CertificateSigningRequests(), Nodes: cs.CoreV1().Nodes(), Dir: dir, NodeName: "csr-agent-node"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := src.ServingCertificate()
	if err != nil || cert == nil {
		t.Fatal(err)
	}
	pool, _ := src.ClientCAs()
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "csr-agent-node", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("serving certificate: %v", err)
	}
	if !cert.Leaf.IPAddresses[len(cert.Leaf.IPAddresses)-1].Equal(net.ParseIP("192.0.2.20")) {
		t.Errorf("IPs %v lack the node's address", cert.Leaf.IPAddresses)
	}
	// A second start reuses the stored certificate: no new request.
	src2, err := csrclient.New(c, csrclient.Options{CSRs: cs.CertificatesV1().CertificateSigningRequests(), Nodes: cs.CoreV1().Nodes(), Dir: dir, NodeName: "csr-agent-node"})
	if err != nil {
		t.Fatal(err)
	}
	cert2, _ := src2.ServingCertificate()
	if !cert2.Leaf.Equal(cert.Leaf) {
		t.Error("restart requested a new certificate although the stored one is valid")
	}
}
