package optest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// CSR describes a CertificateSigningRequest to create.
type CSR struct {
	Name, Signer, CommonName string
	DNS                      []string
	IPs                      []net.IP
	Usages                   []certv1.KeyUsage
	// Expiration is spec.expirationSeconds if not zero.
	Expiration time.Duration
}

// CreateCSR creates r as the user of cfg (the API server fills in the
// requester from the credentials, as it does for a real agent).
func CreateCSR(t testing.TB, cfg *rest.Config, r CSR) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.CommonName}, DNSNames: r.DNS, IPAddresses: r.IPs}, key)
	if err != nil {
		t.Fatal(err)
	}
	c := &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name},
		Spec: certv1.CertificateSigningRequestSpec{
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), SignerName: r.Signer, Usages: r.Usages,
		},
	}
	if r.Expiration > 0 {
		s := int32(r.Expiration / time.Second)
		c.Spec.ExpirationSeconds = &s
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(Ctx(t), c, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CSR %s: %v", r.Name, err)
	}
}

// GetCSR reads a CertificateSigningRequest.
func (e *Env) GetCSR(t testing.TB, name string) *certv1.CertificateSigningRequest {
	t.Helper()
	c := &certv1.CertificateSigningRequest{}
	if err := e.Client.Get(Ctx(t), types.NamespacedName{Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// Approve approves a request the way `kubectl certificate approve` does.
func (e *Env) Approve(t testing.TB, name string) {
	t.Helper()
	c := e.GetCSR(t, name)
	c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove", Message: "by a person",
	})
	if err := e.Client.SubResource("approval").Update(Ctx(t), c); err != nil {
		t.Fatal(err)
	}
}

// Decision is the type of a request's true condition ("" if none).
func Decision(c *certv1.CertificateSigningRequest) string {
	for _, cond := range c.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			return string(cond.Type)
		}
	}
	return ""
}

// WithAgentRBAC installs the agent's ClusterRole and binding, once per suite.
func (e *Env) WithAgentRBAC(t testing.TB) {
	t.Helper()
	e.agentRBAC.Do(func() {
		e.ApplyYAML(t, "config/rbac/agent/role.yaml")
		e.ApplyYAML(t, "config/rbac/agent/role_binding.yaml")
	})
}

// NodeWithIP creates a Node whose status holds one internal IP.
func (e *Env) NodeWithIP(t testing.TB, name, ip string) {
	t.Helper()
	n := Node(name, nil)
	e.CreateAll(t, n)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	if err := e.Client.Status().Update(Ctx(t), n); err != nil {
		t.Fatal(err)
	}
}
