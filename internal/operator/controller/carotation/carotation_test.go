package carotation

import (
	"github.com/prometheus/client_golang/prometheus/testutil"

	"context"
	"crypto/x509"
	"encoding/pem"
	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/opmetrics"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCreateAndRotate(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{Client: c, Clock: clk, Namespace: "ns", Lifetime: 30 * 24 * time.Hour}
	key := types.NamespacedName{Namespace: "ns", Name: casecret.DefaultName}
	req := ctrl.Request{NamespacedName: key}

	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != maxRequeue {
		t.Errorf("requeue after %v, want %v", res.RequeueAfter, maxRequeue)
	}
	first, err := casecret.Load(ctx, c, key)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing to do before two thirds of the lifetime.
	clk.Step(19 * 24 * time.Hour)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if same, _ := casecret.Load(ctx, c, key); !same.CA.Cert.Equal(first.CA.Cert) {
		t.Fatal("rotated too early")
	}
	// Rotated after; the old CA stays trusted until it expires.
	clk.Step(2 * 24 * time.Hour)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	second, _ := casecret.Load(ctx, c, key)
	if second.CA.Cert.Equal(first.CA.Cert) {
		t.Fatal("not rotated")
	}
	if got := testutil.ToFloat64(opmetrics.CertificateExpiry.WithLabelValues("ca")); got != float64(second.CA.Cert.NotAfter.Unix()) {
		t.Errorf("expiry metric = %v, want the new CA's %v", got, second.CA.Cert.NotAfter.Unix())
	}
	if got := countCerts(second.BundlePEM); got != 2 {
		t.Errorf("bundle holds %d certificates, want the new and the old CA", got)
	}
	// After the old CA expired, the next rotation drops it.
	clk.Step(21 * 24 * time.Hour)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	third, _ := casecret.Load(ctx, c, key)
	if got := countCerts(third.BundlePEM); got != 2 {
		t.Errorf("bundle holds %d certificates, want 2 (the expired one dropped)", got)
	}

	// A corrupt Secret is replaced.
	sec := &corev1.Secret{}
	_ = c.Get(ctx, key, sec)
	sec.Data[corev1.TLSPrivateKeyKey] = []byte("garbage")
	_ = c.Update(ctx, sec)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := casecret.Load(ctx, c, key); err != nil {
		t.Errorf("corrupt CA not replaced: %v", err)
	}
}

func countCerts(b []byte) int {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err == nil {
			n++
		}
	}
}
