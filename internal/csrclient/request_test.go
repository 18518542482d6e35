package csrclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/kubernetes/fake"
	certv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// The clients the package is meant to be used with.
var (
	_ CSRAPI  = certv1client.CertificateSigningRequestInterface(nil)
	_ NodeAPI = corev1client.NodeInterface(nil)
	// kubeclient.CSRClient and kubeclient.NodeClient.
	_ CSRAPI  = (*gentype.ClientWithList[*certv1.CertificateSigningRequest, *certv1.CertificateSigningRequestList])(nil)
	_ NodeAPI = (*gentype.ClientWithList[*corev1.Node, *corev1.NodeList])(nil)
)

// fakeCSRs is the fake clientset's CSR client. Like the clientset, it
// says it cannot stream lists (WatchList), so the reflector lists, then
// watches.
type fakeCSRs struct{ CSRAPI }

func (fakeCSRs) IsWatchListSemanticsUnSupported() bool { return true }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const (
	csrName = "kubeblade-agent-n1-0123456789"
	csrUID  = types.UID("uid-1")
)

func pendingCSR() *certv1.CertificateSigningRequest {
	return &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: csrName, UID: csrUID},
		Spec:       certv1.CertificateSigningRequestSpec{SignerName: SignerAgentServing},
	}
}

type mutation func(*certv1.CertificateSigningRequest)

func csrWith(ms ...mutation) *certv1.CertificateSigningRequest {
	c := pendingCSR()
	for _, m := range ms {
		m(c)
	}
	return c
}

func cond(typ certv1.RequestConditionType, reason, msg string) mutation {
	return func(c *certv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
			Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		})
	}
}

var (
	approved = cond(certv1.CertificateApproved, "AutoApproved", "")
	certPEM  = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	signed   = func(c *certv1.CertificateSigningRequest) { c.Status.Certificate = certPEM }
	otherUID = func(c *certv1.CertificateSigningRequest) { c.UID = "uid-2" }
)

// TestWaitForCertificate drives the watch with events: the fake's watch is
// replaced by one the test feeds after the reflector has listed.
func TestWaitForCertificate(t *testing.T) {
	type step struct {
		typ watch.EventType
		obj *certv1.CertificateSigningRequest
	}
	cases := []struct {
		name     string
		initial  *certv1.CertificateSigningRequest // nil: no such request
		events   []step
		cancel   bool // end the context after the events
		wantCert bool
		wantErr  []string // substrings of the error
		wantIs   error
	}{
		{name: "issued before waiting", initial: csrWith(approved, signed), wantCert: true},
		{name: "approved then issued", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(approved)},
			{watch.Modified, csrWith(approved, signed)},
		}, wantCert: true},
		{name: "approved but not issued keeps waiting", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(approved)},
			{watch.Deleted, csrWith(approved)},
		}, wantErr: []string{"deleted"}},
		{name: "certificate without approval keeps waiting", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(signed)},
			{watch.Modified, csrWith(signed, cond(certv1.CertificateDenied, "Late", "denied after all"))},
		}, wantErr: []string{"denied", "Late", "denied after all"}},
		{name: "denied", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(cond(certv1.CertificateDenied, "NotYourNode", "csr-node-2 is not n1"))},
		}, wantErr: []string{"denied", "reason: NotYourNode", "message: csr-node-2 is not n1"}},
		{name: "denied before waiting", initial: csrWith(cond(certv1.CertificateDenied, "NotYourNode", "no")),
			wantErr: []string{"denied", "NotYourNode"}},
		{name: "failed", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(approved, cond(certv1.CertificateFailed, "SignerFailed", "CA unavailable"))},
		}, wantErr: []string{"failed", "SignerFailed", "CA unavailable"}},
		{name: "failed even with a certificate", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(approved, signed, cond(certv1.CertificateFailed, "Broken", "x"))},
		}, wantErr: []string{"failed", "Broken"}},
		{name: "UID changed", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(otherUID, approved, signed)},
		}, wantErr: []string{"replaced", "uid-2"}},
		{name: "UID changed before waiting", initial: csrWith(otherUID, approved, signed), wantErr: []string{"replaced"}},
		{name: "deleted", initial: pendingCSR(), events: []step{
			{watch.Deleted, pendingCSR()},
		}, wantErr: []string{"deleted"}},
		{name: "missing: waits until the context ends", cancel: true, wantErr: []string{"not issued in time"}, wantIs: context.Canceled},
		{name: "context ends", initial: pendingCSR(), events: []step{
			{watch.Modified, csrWith(approved)},
		}, cancel: true, wantErr: []string{"not issued in time"}, wantIs: context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.initial != nil {
				objs = append(objs, tc.initial)
			}
			cs := fake.NewClientset(objs...)
			var mu sync.Mutex
			var selectors []string
			record := func(a k8stesting.Action) {
				mu.Lock()
				defer mu.Unlock()
				switch a := a.(type) {
				case k8stesting.ListAction:
					selectors = append(selectors, "list "+a.GetListRestrictions().Fields.String())
				case k8stesting.WatchAction:
					selectors = append(selectors, "watch "+a.GetWatchRestrictions().Fields.String())
				}
			}
			cs.PrependReactor("list", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
				record(a)
				return false, nil, nil
			})
			watchers := make(chan *watch.RaceFreeFakeWatcher, 10)
			cs.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
				record(a)
				w := watch.NewRaceFreeFake()
				watchers <- w
				return true, w, nil
			})

			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			type result struct {
				cert []byte
				err  error
			}
			done := make(chan result, 1)
			go func() {
				cert, err := waitForCertificate(ctx, fakeCSRs{cs.CertificatesV1().CertificateSigningRequests()}, csrName, csrUID)
				done <- result{cert, err}
			}()
			if len(tc.events) > 0 || tc.cancel {
				select {
				case w := <-watchers:
					for _, e := range tc.events {
						w.Action(e.typ, e.obj)
					}
				case r := <-done:
					t.Fatalf("returned before watching: %q, %v", r.cert, r.err)
				case <-ctx.Done():
					t.Fatal("no watch")
				}
				if tc.cancel {
					cancel()
				}
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(time.Minute):
				t.Fatal("waitForCertificate did not return")
			}

			if tc.wantCert {
				if r.err != nil || string(r.cert) != string(certPEM) {
					t.Fatalf("got %q, %v; want the certificate", r.cert, r.err)
				}
			} else {
				if r.err == nil {
					t.Fatalf("got %q and no error; want an error with %q", r.cert, tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(r.err.Error(), s) {
						t.Errorf("error %q lacks %q", r.err, s)
					}
				}
				if tc.wantIs != nil && !errors.Is(r.err, tc.wantIs) {
					t.Errorf("error %q is not %v", r.err, tc.wantIs)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(selectors) == 0 {
				t.Fatal("neither listed nor watched")
			}
			for _, s := range selectors {
				if !strings.HasSuffix(s, " metadata.name="+csrName) {
					t.Errorf("%s: want field selector metadata.name=%s", s, csrName)
				}
			}
		})
	}
}

func csrPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "n1"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSubmitAlreadyExists: a request of the same name exists (the name
// embeds a hash of the key). It is adopted only if it asks the same
// signer for our key.
func TestSubmitAlreadyExists(t *testing.T) {
	badSignature := func(t *testing.T, c *certv1.CertificateSigningRequest) {
		b, _ := pem.Decode(c.Spec.Request)
		der := slices.Clone(b.Bytes)
		der[len(der)-1] ^= 0xff // the last byte of the signature's s
		if _, err := x509.ParseCertificateRequest(der); err != nil {
			t.Fatalf("tampered request does not parse: %v", err)
		}
		c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	cases := []struct {
		name    string
		add     bool // put the existing request in place (else Get finds nothing)
		mutate  func(*testing.T, *certv1.CertificateSigningRequest)
		wantErr string
	}{
		{name: "ours from an earlier attempt", add: true},
		{name: "different key", add: true, mutate: func(t *testing.T, c *certv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, newKey(t))
		}, wantErr: "different public key"},
		{name: "different signer", add: true, mutate: func(_ *testing.T, c *certv1.CertificateSigningRequest) {
			c.Spec.SignerName = SignerClient
		}, wantErr: `signer "kubeblade.io/client"`},
		{name: "request not PEM", add: true, mutate: func(_ *testing.T, c *certv1.CertificateSigningRequest) {
			c.Spec.Request = []byte("junk")
		}, wantErr: "no PEM CERTIFICATE REQUEST"},
		{name: "our key, signature broken", add: true, mutate: badSignature, wantErr: "not signed by our key"},
		{name: "gone again", wantErr: "cannot be read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
				c := a.(k8stesting.CreateAction).GetObject().(*certv1.CertificateSigningRequest).DeepCopy()
				if tc.add {
					c.UID = "existing"
					if tc.mutate != nil {
						tc.mutate(t, c)
					}
					if err := cs.Tracker().Add(c); err != nil {
						t.Error(err)
					}
				}
				return true, nil, apierrors.NewAlreadyExists(certv1.Resource("certificatesigningrequests"), c.Name)
			})
			keyPEM, name, uid, key, err := Submit(ctxT(t), cs.CertificatesV1().CertificateSigningRequests(), Request{
				Name: "kubeblade-agent-n1", SignerName: SignerAgentServing, CommonName: "n1",
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "kubeblade-agent-n1-") {
					t.Errorf("error %q does not name the request", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if uid != "existing" || !strings.HasPrefix(name, "kubeblade-agent-n1-") || key == nil || len(keyPEM) == 0 {
				t.Fatalf("got name %q uid %q", name, uid)
			}
		})
	}
}

func TestSubmitCreateError(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(certv1.Resource("certificatesigningrequests"), "x", errors.New("no"))
	})
	_, _, _, _, err := Submit(ctxT(t), cs.CertificatesV1().CertificateSigningRequests(), Request{Name: "a", SignerName: SignerClient})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("error %v, want Forbidden (wrapped)", err)
	}
}

// TestSubmitCreates checks the request object.
func TestSubmitCreates(t *testing.T) {
	for _, tc := range []struct {
		signer string
		life   time.Duration
		usage  certv1.KeyUsage
		secs   int32
	}{
		{SignerAgentServing, 48 * time.Hour, certv1.UsageServerAuth, 48 * 3600},
		{SignerClient, 0, certv1.UsageClientAuth, 0},
	} {
		t.Run(tc.signer, func(t *testing.T) {
			cs := fake.NewClientset()
			csrs := cs.CertificatesV1().CertificateSigningRequests()
			_, name, _, key, err := Submit(ctxT(t), csrs, Request{
				Name: "x-", SignerName: tc.signer, CommonName: "n1", Organization: []string{"o"},
				DNSNames: []string{"n1"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.1")}, Lifetime: tc.life,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, "x-") || strings.HasPrefix(name, "x--") || len(name) != len("x-")+10 {
				t.Errorf("name %q", name)
			}
			c, err := csrs.Get(ctxT(t), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.Spec.SignerName != tc.signer || !slices.Equal(c.Spec.Usages, []certv1.KeyUsage{certv1.UsageDigitalSignature, tc.usage}) {
				t.Errorf("spec %+v", c.Spec)
			}
			if tc.secs == 0 && c.Spec.ExpirationSeconds != nil || tc.secs != 0 && (c.Spec.ExpirationSeconds == nil || *c.Spec.ExpirationSeconds != tc.secs) {
				t.Errorf("expirationSeconds %v, want %d", c.Spec.ExpirationSeconds, tc.secs)
			}
			if err := compatible(c, tc.signer, key); err != nil {
				t.Errorf("our own request: %v", err)
			}
			b, _ := pem.Decode(c.Spec.Request)
			req, err := x509.ParseCertificateRequest(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if req.Subject.CommonName != "n1" || !slices.Equal(req.Subject.Organization, []string{"o"}) ||
				!slices.Equal(req.DNSNames, []string{"n1"}) || len(req.IPAddresses) != 1 {
				t.Errorf("request %+v", req)
			}
		})
	}
}

// TestObtainFake runs Obtain against the fake: the request is approved
// and signed (with a CA bundle) as soon as it exists.
func TestObtainFake(t *testing.T) {
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	cs := fake.NewClientset()
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	var told string
	iss, err := Obtain(ctxT(t), fakeCSRs{csrs}, Request{Name: "bladectl-alice", SignerName: SignerClient, CommonName: "alice"}, func(name string) {
		told = name
		c, err := csrs.Get(ctxT(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(c.Spec.Request)
		req, err := x509.ParseCertificateRequest(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(2), Subject: req.Subject,
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(30 * time.Minute),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, req.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		approved(c)
		c.Status.Certificate = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...)
		if _, err := csrs.UpdateStatus(ctxT(t), c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if iss.CSRName != told || !strings.HasPrefix(told, "bladectl-alice-") {
		t.Errorf("CSR %q, told %q", iss.CSRName, told)
	}
	if string(iss.CAPEM) != string(caPEM) {
		t.Error("CA bundle differs")
	}
	if _, err := tls.X509KeyPair(iss.CertPEM, iss.KeyPEM); err != nil {
		t.Errorf("certificate and key do not match: %v", err)
	}
}

func TestNodeAddresses(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "n1"},
			{Type: corev1.NodeInternalIP, Address: "192.0.2.1"},
			{Type: corev1.NodeExternalIP, Address: "198.51.100.1"},
			{Type: corev1.NodeInternalIP, Address: "192.0.2.1"},
		}},
	})
	ips, err := NodeAddresses(ctxT(t), cs.CoreV1().Nodes(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) != 2 || !ips[0].Equal(net.ParseIP("192.0.2.1")) || !ips[1].Equal(net.ParseIP("198.51.100.1")) {
		t.Errorf("addresses %v", ips)
	}
	if _, err := NodeAddresses(ctxT(t), cs.CoreV1().Nodes(), "n2"); !apierrors.IsNotFound(err) {
		t.Errorf("missing node: %v", err)
	}
}

func TestNewRequiresClients(t *testing.T) {
	cs := fake.NewClientset()
	_, err := New(ctxT(t), Options{CSRs: cs.CertificatesV1().CertificateSigningRequests(), Dir: t.TempDir(), NodeName: "n1"})
	if err == nil || !strings.Contains(err.Error(), "CSRs, Nodes, Dir and NodeName are required") {
		t.Fatalf("without Nodes: %v", err)
	}
}
