package csrpolicy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeblade/kubeblade/internal/pki"
)

const testAgentUser = "system:serviceaccount:kubeblade-system:kubeblade-agent"

var errAPIDown = errors.New("the API server is down")

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// failingGets makes every Get of the fake client fail with errAPIDown.
var failingGets = interceptor.Funcs{
	Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errAPIDown
	},
}

// request builds a CSR for signer from user, whose token names node.
func request(t *testing.T, signer, user, node, cn string, ips []net.IP, usages ...certv1.KeyUsage) *certv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	c := &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "req"},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer, Username: user, Usages: usages,
		},
	}
	if node != "" {
		c.Spec.Extra = map[string]certv1.ExtraValue{NodeNameExtra: {node}}
	}
	return c
}

func TestCheckRequest(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "blade-1"},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
	}
	serving := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	nodeIP, otherIP, loopback := []net.IP{net.ParseIP("10.0.0.1")}, []net.IP{net.ParseIP("10.0.0.2")}, []net.IP{net.ParseIP("127.0.0.1")}
	garbage := request(t, SignerAgentServing, testAgentUser, "blade-1", "blade-1", nil, serving...)
	garbage.Spec.Request = []byte("not PEM")

	for name, tc := range map[string]struct {
		csr       *certv1.CertificateSigningRequest
		nodesDown bool
		wantUsage pki.Usage
		wantErr   bool
		transient bool
	}{
		"client request": {
			csr:       request(t, SignerClient, "alice", "", "alice", nil, certv1.UsageClientAuth),
			wantUsage: pki.UsageClient,
		},
		"client request with an IP": {
			csr:     request(t, SignerClient, "alice", "", "alice", loopback, certv1.UsageClientAuth),
			wantErr: true,
		},
		"no PEM request": {csr: garbage, wantErr: true},
		"agent for its own node and address": {
			csr:       request(t, SignerAgentServing, testAgentUser, "blade-1", "blade-1", nodeIP, serving...),
			wantUsage: pki.UsageServer,
		},
		"requester is not the agent": {
			csr:     request(t, SignerAgentServing, "mallory", "blade-1", "blade-1", nil, serving...),
			wantErr: true,
		},
		"token names no node": {
			csr:     request(t, SignerAgentServing, testAgentUser, "", "blade-1", nil, serving...),
			wantErr: true,
		},
		"another node's name": {
			csr:     request(t, SignerAgentServing, testAgentUser, "blade-1", "blade-2", nil, serving...),
			wantErr: true,
		},
		"an address the node does not have": {
			csr:     request(t, SignerAgentServing, testAgentUser, "blade-1", "blade-1", otherIP, serving...),
			wantErr: true,
		},
		"node gone: loopback still passes": {
			csr:       request(t, SignerAgentServing, testAgentUser, "blade-9", "blade-9", loopback, serving...),
			wantUsage: pki.UsageServer,
		},
		"node gone: its old address is denied": {
			csr:     request(t, SignerAgentServing, testAgentUser, "blade-9", "blade-9", nodeIP, serving...),
			wantErr: true,
		},
		"node unreadable: retried, not denied": {
			csr:       request(t, SignerAgentServing, testAgentUser, "blade-1", "blade-1", nodeIP, serving...),
			nodesDown: true,
			wantErr:   true,
			transient: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(node)
			if tc.nodesDown {
				b = b.WithInterceptorFuncs(failingGets)
			}
			x, usage, err := Check(context.Background(), b.Build(), testAgentUser, tc.csr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if IsTransient(err) != tc.transient {
				t.Errorf("transient = %t, want %t (err %v)", IsTransient(err), tc.transient, err)
			}
			if tc.transient && !errors.Is(err, errAPIDown) {
				t.Errorf("err = %v, want it to wrap %v", err, errAPIDown)
			}
			if err != nil {
				return
			}
			if usage != tc.wantUsage {
				t.Errorf("usage = %v, want %v", usage, tc.wantUsage)
			}
			if x == nil || x.Subject.CommonName == "" {
				t.Errorf("parsed request = %v, want the request's", x)
			}
		})
	}
}

func TestGetUnfinished(t *testing.T) {
	withCondition := func(typ certv1.RequestConditionType) *certv1.CertificateSigningRequest {
		return &certv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "req"},
			Status: certv1.CertificateSigningRequestStatus{Conditions: []certv1.CertificateSigningRequestCondition{
				{Type: typ, Status: corev1.ConditionTrue},
			}},
		}
	}
	issued := withCondition(certv1.CertificateApproved)
	issued.Status.Certificate = []byte("issued")

	for name, tc := range map[string]struct {
		stored   *certv1.CertificateSigningRequest
		apiDown  bool
		wantOpen bool
		wantErr  bool
	}{
		"gone":                 {},
		"new":                  {stored: &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "req"}}, wantOpen: true},
		"approved, not issued": {stored: withCondition(certv1.CertificateApproved), wantOpen: true},
		"issued":               {stored: issued},
		"denied":               {stored: withCondition(certv1.CertificateDenied)},
		"failed":               {stored: withCondition(certv1.CertificateFailed)},
		"unreadable: retried":  {apiDown: true, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(testScheme(t))
			if tc.stored != nil {
				b = b.WithObjects(tc.stored)
			}
			if tc.apiDown {
				b = b.WithInterceptorFuncs(failingGets)
			}
			c, err := GetUnfinished(context.Background(), b.Build(), types.NamespacedName{Name: "req"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if (c != nil) != tc.wantOpen {
				t.Errorf("got %v, want a request: %t", c, tc.wantOpen)
			}
		})
	}
}
