package security

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/csrpolicy"
	"github.com/kubeblade/kubeblade/internal/pki"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// operatorUser is the operator's ServiceAccount, which the operator in
// this suite runs as, under config/rbac/operator.
const operatorUser = "system:serviceaccount:" + testenv.AgentNamespace + ":kubeblade-operator"

var (
	opts         operator.Options
	stopOperator = func() {}
)

func operatorConfig() *rest.Config {
	return testenv.As(env.Config, operatorUser, "system:serviceaccounts", "system:serviceaccounts:"+testenv.AgentNamespace)
}

// startOperator grants the operator's ServiceAccount the generated Roles
// of config/rbac/operator and runs every controller as that account:
// whatever the operator needs and the Roles lack fails a test here.
func startOperator(ctx context.Context) error {
	if err := testenv.ApplyFiles(ctx, admin, "config/rbac/operator/role.yaml"); err != nil {
		return err
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kubeblade-operator", Namespace: testenv.AgentNamespace}}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: "kubeblade-operator"}
	}
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeblade-operator"}, RoleRef: ref("ClusterRole"), Subjects: subject},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeblade-operator", Namespace: testenv.AgentNamespace}, RoleRef: ref("Role"), Subjects: subject},
	} {
		if err := admin.Create(ctx, o); err != nil {
			return err
		}
	}
	opts = operator.DefaultOptions()
	opts.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:test"
	mgr, err := ctrl.NewManager(operatorConfig(), operator.ManagerOptions(opts, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}))
	if err != nil {
		return err
	}
	if err := operator.Setup(context.Background(), mgr, opts); err != nil {
		return err
	}
	run, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	stopOperator = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		if err := mgr.Start(run); err != nil {
			fmt.Fprintln(os.Stderr, "security: operator:", err)
			os.Exit(1)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the operator's cache did not sync (its RBAC?)")
	}
	return nil
}

// bladeNode creates a Node as a kubelet registers it, with addresses.
func bladeNode(t *testing.T, name string, ips ...string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if err := admin.Status().Update(ctx(t), n); err != nil {
		t.Fatal(err)
	}
	return n
}

// obtain asks for a serving certificate the way the agent of n does
// (internal/csrclient, as n's agent ServiceAccount) and waits for the
// operator's answer.
func obtain(t *testing.T, n *corev1.Node, dns []string, ips ...string) (*csrclient.Issued, error) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testenv.AsAgent(env.Config, n.Name, n.UID))
	if err != nil {
		t.Fatal(err)
	}
	var addrs []net.IP
	for _, ip := range ips {
		addrs = append(addrs, net.ParseIP(ip))
	}
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return csrclient.Obtain(c, cs.CertificatesV1().CertificateSigningRequests(), csrclient.Request{
		Name: "kubeblade-agent-" + n.Name, SignerName: csrclient.SignerAgentServing, CommonName: n.Name,
		DNSNames: dns, IPAddresses: addrs,
	}, nil)
}

// TestForgedAddressCertificate: the agent of blade-a wants a serving
// certificate that blade-b's clients would accept. It cannot put blade-b's
// address on its Node (admission), the approver will not sign an address
// its Node does not report, nor one another Node reports (even if blade-a's
// Node were made to report it, then for neither blade), nor too many
// names; its own names and addresses are signed.
func TestForgedAddressCertificate(t *testing.T) {
	testenv.Need(t)
	// Addresses unique to each run of the test (go test -count).
	run := nodeSeq.Add(1)
	ipA, ipB := runAddress(run, 1), runAddress(run, 2)
	a := bladeNode(t, fmt.Sprintf("forge-a-%d", run), ipA)
	b := bladeNode(t, fmt.Sprintf("forge-b-%d", run), ipB)
	agentA := as(testenv.AsAgent(env.Config, a.Name, a.UID))

	// 1. Claim blade-b's address on its own Node.
	err := agentA.Status().Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.Name}}, client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"status":{"addresses":[{"type":"InternalIP","address":"`+ipB+`"}]}}`)))
	refused(t, "adding blade-b's address to its Node", err, "kubeblade-agent-own-node", "status.addresses")

	// 2. Ask for it anyway.
	_, err = obtain(t, a, []string{a.Name}, ipA, ipB)
	if err == nil || !strings.Contains(err.Error(), "denied") || !strings.Contains(err.Error(), ipB+" is not an address of node "+a.Name) {
		t.Errorf("a certificate for blade-b's address: %v, want denied", err)
	}

	// 3. Its Node reports the address too (a misconfigured or compromised
	// kubelet): the address is still blade-b's.
	a.Status.Addresses = append(a.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ipB})
	if err := admin.Status().Update(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	_, err = obtain(t, a, []string{a.Name}, ipB)
	if err == nil || !strings.Contains(err.Error(), "also an address of node "+b.Name) {
		t.Errorf("a certificate for an address two Nodes report: %v, want denied", err)
	}

	// While two Nodes report an address, neither gets a certificate for
	// it; blade-b's is signed again once only blade-b reports it.
	if _, err := obtain(t, b, []string{b.Name}, ipB); err == nil || !strings.Contains(err.Error(), "also an address of node "+a.Name) {
		t.Errorf("blade-b's address while forge-a reports it too: %v, want denied", err)
	}
	a.Status.Addresses = a.Status.Addresses[:1]
	if err := admin.Status().Update(ctx(t), a); err != nil {
		t.Fatal(err)
	}

	// 4. More names than anyone needs.
	many := slices.Repeat([]string{"127.0.0.1"}, csrpolicy.MaxSANs)
	_, err = obtain(t, a, []string{a.Name}, many...)
	if err == nil || !strings.Contains(err.Error(), "alternative names") {
		t.Errorf("a certificate with %d names: %v, want denied", csrpolicy.MaxSANs+1, err)
	}

	// 5. Its own name and address: signed, and nothing else in it.
	iss, err := obtain(t, b, []string{b.Name, "localhost"}, ipB, "127.0.0.1")
	if err != nil {
		t.Fatalf("blade-b's own certificate: %v", err)
	}
	cert, err := pki.ParseCertificate(iss.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(iss.CAPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: b.Name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("blade-b's certificate does not verify for its name: %v", err)
	}
	if err := cert.VerifyHostname(ipA); err == nil {
		t.Error("blade-b's certificate is valid for blade-a's address")
	}
}

// TestGrandfatheredImageIsNotRun: a BladeConfig that got a refused image
// past the admission policy (it predates it) runs the operator's own agent
// image and says so: Degraded with reason ImageNotAllowed.
func TestGrandfatheredImageIsNotRun(t *testing.T) {
	testenv.Need(t)
	testwait.Eventually(t, time.Minute, "the grandfathered config Degraded", func(c context.Context) (bool, string) {
		bc := &kbv1.BladeConfig{}
		if err := admin.Get(c, client.ObjectKey{Name: grandfathered}, bc); err != nil {
			return false, err.Error()
		}
		d := meta.FindStatusCondition(bc.Status.Conditions, kbv1.BladeConfigDegraded)
		if d == nil {
			return false, "no Degraded condition"
		}
		return d.Status == metav1.ConditionTrue && d.Reason == "ImageNotAllowed" && strings.Contains(d.Message, "ghcr.io/evil/kubeblade"), d.Reason + ": " + d.Message
	})
	ds := &appsv1.DaemonSet{}
	if err := admin.Get(ctx(t), client.ObjectKey{Namespace: testenv.AgentNamespace, Name: agentdaemonset.Name(grandfathered)}, ds); err != nil {
		t.Fatal(err)
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != opts.DaemonSet.Image {
		t.Errorf("the DaemonSet runs %s, want the operator's own %s", img, opts.DaemonSet.Image)
	}
}

// TestOperatorIdentity: the operator's ServiceAccount reaches only the
// objects its controllers use: the CA Secret (no other Secret), its own
// Lease, no Node status, no BladeConfig replacement.
func TestOperatorIdentity(t *testing.T) {
	testenv.Need(t)
	op := as(operatorConfig())
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: testenv.AgentNamespace}, StringData: map[string]string{"k": "v"}}
	if err := admin.Create(ctx(t), other); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: testenv.AgentNamespace}}
	if err := admin.Create(ctx(t), lease); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	n := bladeNode(t, fmt.Sprintf("op-node-%d", nodeSeq.Add(1)), "10.2.0.1")

	refused(t, "reading another Secret", op.Get(ctx(t), client.ObjectKeyFromObject(other), &corev1.Secret{}))
	refused(t, "listing Secrets", op.List(ctx(t), &corev1.SecretList{}, client.InNamespace(testenv.AgentNamespace)))
	refused(t, "reading another Lease", op.Get(ctx(t), client.ObjectKeyFromObject(lease), &coordinationv1.Lease{}))
	refused(t, "patching Node status", op.Status().Patch(ctx(t), n, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"x"}}`))))
	bc := &kbv1.BladeConfig{}
	if err := admin.Get(ctx(t), client.ObjectKey{Name: grandfathered}, bc); err != nil {
		t.Fatal(err)
	}
	refused(t, "replacing a BladeConfig", op.Update(ctx(t), bc))
	refused(t, "deleting every DaemonSet at once", op.DeleteAllOf(ctx(t), &appsv1.DaemonSet{}, client.InNamespace(testenv.AgentNamespace)))

	testwait.Eventually(t, time.Minute, "the CA Secret", func(c context.Context) (bool, string) {
		err := op.Get(c, client.ObjectKey{Namespace: testenv.AgentNamespace, Name: casecret.DefaultName}, &corev1.Secret{})
		return err == nil, fmt.Sprint(err)
	})
	allowed(t, "listing the CA Secret by name", op.List(ctx(t), &corev1.SecretList{}, client.InNamespace(testenv.AgentNamespace),
		client.MatchingFields{"metadata.name": casecret.DefaultName}))
}

// TestClientCertificateRolesThroughTheCSRAPI: bladectl's flow (a client
// CSR a person approves) gives a certificate with exactly the role asked
// for; one that names none or two is not signed.
func TestClientCertificateRolesThroughTheCSRAPI(t *testing.T) {
	testenv.Need(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	approve := func(name string) {
		testwait.Eventually(t, time.Minute, "approving "+name, func(c context.Context) (bool, string) {
			csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(c, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
				Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove"})
			_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(c, name, csr, metav1.UpdateOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	for name, tc := range map[string]struct {
		orgs []string
		want pki.Role
		say  string
	}{
		"viewer":    {[]string{pki.OrgViewers}, pki.RoleViewer, ""},
		"operator":  {[]string{pki.OrgOperators}, pki.RoleOperator, ""},
		"no role":   {nil, 0, "exactly one role"},
		"two roles": {[]string{pki.OrgViewers, pki.OrgOperators}, 0, "exactly one role"},
	} {
		t.Run(name, func(t *testing.T) {
			c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			iss, err := csrclient.Obtain(c, cs.CertificatesV1().CertificateSigningRequests(), csrclient.Request{
				Name: "bladectl-alice-" + strings.ReplaceAll(name, " ", "-"), SignerName: csrclient.SignerClient, CommonName: "alice", Organization: tc.orgs,
			}, approve)
			if tc.say != "" {
				if err == nil || !strings.Contains(err.Error(), tc.say) {
					t.Fatalf("Obtain = %v, want a refusal saying %q", err, tc.say)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cert, err := pki.ParseCertificate(iss.CertPEM)
			if err != nil {
				t.Fatal(err)
			}
			if role, err := pki.RoleOf(cert.Subject.Organization); role != tc.want || err != nil {
				t.Errorf("certificate role %s (%v), want %s", role, err, tc.want)
			}
		})
	}
}

// TestServingCertificateHasNoOrganization (issue 31, finding 8): the agent
// asks for a serving certificate with O=system:masters. It is signed (the
// names are its own), but without any Organization: on 8f44781 the signer
// copied the requested one.
func TestServingCertificateHasNoOrganization(t *testing.T) {
	testenv.Need(t)
	run := nodeSeq.Add(1)
	n := bladeNode(t, fmt.Sprintf("org-%d", run), runAddress(run, 3))
	cs, err := kubernetes.NewForConfig(testenv.AsAgent(env.Config, n.Name, n.UID))
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	iss, err := csrclient.Obtain(c, cs.CertificatesV1().CertificateSigningRequests(), csrclient.Request{
		Name: "kubeblade-agent-" + n.Name, SignerName: csrclient.SignerAgentServing, CommonName: n.Name,
		Organization: []string{"system:masters"}, DNSNames: []string{n.Name},
	}, nil)
	if err != nil {
		t.Fatalf("the serving certificate: %v", err)
	}
	cert, err := pki.ParseCertificate(iss.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Subject.Organization) != 0 || cert.Subject.CommonName != n.Name {
		t.Errorf("serving certificate subject %v: want CN=%s and no Organization", cert.Subject, n.Name)
	}
}

// runAddress is IPv4 address host of the run of a test that took run from
// nodeSeq: no other Node reports it, and it stays a valid address however
// many runs go test -count makes (run fills two octets, where one would
// overflow past 255 runs and give the CSR an address that is none).
func runAddress(run int32, host int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+run/256, run%256, host)
}
