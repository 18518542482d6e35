package csrapprover_test

import (
	"context"
	"net"
	"os"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/controller/csrapprover"
	"github.com/kubeblade/kubeblade/internal/operator/csrpolicy"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The approver runs alone: nothing signs what it approves.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&csrapprover.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(operator.Name),
		Clock: clock.RealClock{}, AgentUser: o.AgentUser()}).SetupWithManager(mgr)
})

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

var (
	serving = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	client  = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
)

func TestAgentServingRules(t *testing.T) {
	e := suite.Need(t)
	e.WithAgentRBAC(t)
	e.NodeWithIP(t, "ap-node-1", "192.0.2.10")
	agent := e.Impersonate("ap-node-1")

	for name, tc := range map[string]struct {
		cfg  *rest.Config
		csr  optest.CSR
		want string
	}{
		"own node": {agent, optest.CSR{Name: "ap-own", CommonName: "ap-node-1", DNS: []string{"ap-node-1", "localhost"},
			IPs: []net.IP{net.ParseIP("192.0.2.10"), net.ParseIP("127.0.0.1")}, Usages: serving}, "Approved"},
		"other node name":   {agent, optest.CSR{Name: "ap-other-cn", CommonName: "ap-node-2", DNS: []string{"ap-node-2"}, Usages: serving}, "Denied"},
		"other node as SAN": {agent, optest.CSR{Name: "ap-other-san", CommonName: "ap-node-1", DNS: []string{"ap-node-2"}, Usages: serving}, "Denied"},
		"foreign IP":        {agent, optest.CSR{Name: "ap-foreign-ip", CommonName: "ap-node-1", IPs: []net.IP{net.ParseIP("198.51.100.7")}, Usages: serving}, "Denied"},
		"client usage":      {agent, optest.CSR{Name: "ap-client-usage", CommonName: "ap-node-1", Usages: client}, "Denied"},
		"not the agent":     {e.Config, optest.CSR{Name: "ap-not-agent", CommonName: "ap-node-1", Usages: serving}, "Denied"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.csr.Signer = csrpolicy.SignerAgentServing
			optest.CreateCSR(t, tc.cfg, tc.csr)
			testwait.Eventually(t, optest.Timeout, "a decision", func(context.Context) (bool, string) {
				return optest.Decision(e.GetCSR(t, tc.csr.Name)) != "", ""
			})
			c := e.GetCSR(t, tc.csr.Name)
			if got := optest.Decision(c); got != tc.want {
				t.Fatalf("decision %s, want %s (%+v)", got, tc.want, c.Status.Conditions)
			}
			if len(c.Status.Certificate) > 0 {
				t.Error("the approver issued a certificate: that is the signer's job")
			}
			reason := csrapprover.ReasonAutoApproved
			if tc.want == "Denied" {
				reason = csrapprover.ReasonDenied
			}
			if c.Status.Conditions[0].Reason != reason {
				t.Errorf("condition reason %s, want %s", c.Status.Conditions[0].Reason, reason)
			}
			e.WaitEvent(t, "CertificateSigningRequest", tc.csr.Name, reason)
		})
	}
}

// Client certificates need a person; other signers are not kubeblade's.
// The manager's predicate hides them from the approver, so a reconcile
// is called directly to show the approver itself leaves them alone.
func TestLeavesOtherRequestsAlone(t *testing.T) {
	e := suite.Need(t)
	e.WithAgentRBAC(t)
	optest.CreateCSR(t, e.Config, optest.CSR{Name: "ap-client", Signer: csrpolicy.SignerClient, CommonName: "alice", Usages: client})
	optest.CreateCSR(t, e.Impersonate("ap-node-1"), optest.CSR{Name: "ap-foreign-signer", Signer: "example.com/other", CommonName: "ap-node-1", Usages: serving})
	direct := &csrapprover.Reconciler{Client: e.Client, APIReader: e.Client, Clock: clock.RealClock{}, AgentUser: e.Options.AgentUser()}
	for _, name := range []string{"ap-client", "ap-foreign-signer"} {
		if _, err := direct.Reconcile(optest.Ctx(t), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
		if c := e.GetCSR(t, name); len(c.Status.Conditions) > 0 || len(c.Status.Certificate) > 0 {
			t.Errorf("%s was acted on: %+v", name, c.Status)
		}
	}
}
