package csrsigner_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/controller/csrsigner"
	"github.com/kubeblade/kubeblade/internal/operator/csrpolicy"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The signer runs alone: the tests approve requests as a person would and
// create the CA Secret themselves.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&csrsigner.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(operator.Name),
		Clock: o.Clock, AgentUser: o.AgentUser(), CASecret: caKey, Lifetime: o.CertificateLifetime}).SetupWithManager(mgr)
})

var caKey = types.NamespacedName{Namespace: optest.Namespace, Name: casecret.DefaultName}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

var (
	serving = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	client  = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
)

// ensureCA creates the CA Secret as the rotation controller would, once.
func ensureCA(t *testing.T, e *optest.Env) *casecret.Authority {
	t.Helper()
	s := casecret.New(caKey)
	if _, err := casecret.Fill(s, nil, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(optest.Ctx(t), s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	a, err := casecret.Load(optest.Ctx(t), e.Client, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// issued waits for the certificate of an approved request and checks it
// against the CA.
func issued(t *testing.T, e *optest.Env, a *casecret.Authority, name string, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	testwait.Eventually(t, optest.Timeout, "the certificate of "+name, func(context.Context) (bool, string) {
		c := e.GetCSR(t, name)
		return len(c.Status.Certificate) > 0, optest.Decision(c)
	})
	leaf, bundle, err := csrclient.SplitChain(e.GetCSR(t, name).Status.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if string(bundle) != string(a.BundlePEM) {
		t.Error("the CA bundle after the certificate is not the Secret's")
	}
	b, _ := pem.Decode(leaf)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(a.CA.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("issued certificate does not verify against the CA Secret: %v", err)
	}
	return cert
}

func TestSignsApprovedRequests(t *testing.T) {
	e := suite.Need(t)
	e.WithAgentRBAC(t)
	a := ensureCA(t, e)
	e.NodeWithIP(t, "sg-node-1", "192.0.2.30")

	optest.CreateCSR(t, e.Impersonate("sg-node-1"), optest.CSR{Name: "sg-agent", Signer: csrpolicy.SignerAgentServing, CommonName: "sg-node-1",
		DNS: []string{"sg-node-1"}, IPs: []net.IP{net.ParseIP("192.0.2.30")}, Usages: serving, Expiration: time.Hour})
	optest.CreateCSR(t, e.Config, optest.CSR{Name: "sg-client", Signer: csrpolicy.SignerClient, CommonName: "alice", Usages: client})
	e.Approve(t, "sg-agent")
	e.Approve(t, "sg-client")

	cert := issued(t, e, a, "sg-agent", x509.ExtKeyUsageServerAuth)
	if cert.Subject.CommonName != "sg-node-1" || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("192.0.2.30")) {
		t.Errorf("certificate for %s %v", cert.Subject.CommonName, cert.IPAddresses)
	}
	// spec.expirationSeconds shortens the default lifetime.
	if life := cert.NotAfter.Sub(cert.NotBefore); life > time.Hour+10*time.Minute {
		t.Errorf("lifetime %s, want at most the hour asked for (plus the backdating)", life)
	}
	e.WaitEvent(t, "CertificateSigningRequest", "sg-agent", csrsigner.ReasonSigned)

	if cert := issued(t, e, a, "sg-client", x509.ExtKeyUsageClientAuth); cert.Subject.CommonName != "alice" {
		t.Errorf("client certificate for %q", cert.Subject.CommonName)
	}
}

// A person who approves an agent's request for another Node by mistake
// does not get it signed.
func TestRechecksAgentRequests(t *testing.T) {
	e := suite.Need(t)
	e.WithAgentRBAC(t)
	ensureCA(t, e)
	optest.CreateCSR(t, e.Impersonate("sg-node-2"), optest.CSR{Name: "sg-mistake", Signer: csrpolicy.SignerAgentServing, CommonName: "sg-node-3", Usages: serving})
	e.Approve(t, "sg-mistake")
	testwait.Eventually(t, optest.Timeout, "the request failed", func(context.Context) (bool, string) {
		c := e.GetCSR(t, "sg-mistake")
		for _, cond := range c.Status.Conditions {
			if cond.Type == certv1.CertificateFailed {
				return true, ""
			}
		}
		return false, optest.Decision(c)
	})
	if c := e.GetCSR(t, "sg-mistake"); len(c.Status.Certificate) > 0 {
		t.Error("a request for another node was signed")
	}
	e.WaitEvent(t, "CertificateSigningRequest", "sg-mistake", csrsigner.ReasonSignFailed)
}

// Nothing is signed before it is approved.
func TestWaitsForApproval(t *testing.T) {
	e := suite.Need(t)
	ensureCA(t, e)
	optest.CreateCSR(t, e.Config, optest.CSR{Name: "sg-pending", Signer: csrpolicy.SignerClient, CommonName: "bob", Usages: client})
	direct := &csrsigner.Reconciler{Client: e.Client, APIReader: e.Client, Clock: e.Options.Clock, AgentUser: e.Options.AgentUser(), CASecret: caKey}
	if _, err := direct.Reconcile(optest.Ctx(t), ctrl.Request{NamespacedName: types.NamespacedName{Name: "sg-pending"}}); err != nil {
		t.Fatal(err)
	}
	if c := e.GetCSR(t, "sg-pending"); len(c.Status.Conditions) > 0 || len(c.Status.Certificate) > 0 {
		t.Errorf("an unapproved request was acted on: %+v", c.Status)
	}
}
