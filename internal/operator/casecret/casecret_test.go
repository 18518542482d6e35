package casecret

import (
	"encoding/pem"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestFillAndParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(types.NamespacedName{Namespace: "ns", Name: DefaultName})
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("type %s", s.Type)
	}
	notAfter, err := Fill(s, nil, now, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	if !first.CA.Cert.NotAfter.Equal(notAfter) || first.CA.Cert.Subject.CommonName != CommonName {
		t.Errorf("CA %s until %s, want %s until %s", first.CA.Cert.Subject.CommonName, first.CA.Cert.NotAfter, CommonName, notAfter)
	}

	// A rotation keeps the old CA in the bundle while it is valid...
	if _, err := Fill(s, first.BundlePEM, now.Add(20*24*time.Hour), 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	second, _ := Parse(s)
	if got := len(splitPEM(second.BundlePEM)); got != 2 {
		t.Errorf("bundle holds %d certificates after a rotation, want 2", got)
	}
	// ...and drops it once it expired.
	if _, err := Fill(s, second.BundlePEM, now.Add(31*24*time.Hour), 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	third, _ := Parse(s)
	if got := len(splitPEM(third.BundlePEM)); got != 2 {
		t.Errorf("bundle holds %d certificates, want 2 (the expired one dropped)", got)
	}

	// A Secret without a bundle trusts its own certificate.
	delete(s.Data, KeyBundle)
	a, err := Parse(s)
	if err != nil || string(a.BundlePEM) != string(s.Data[corev1.TLSCertKey]) {
		t.Errorf("bundle without ca.crt = %q, %v", a.BundlePEM, err)
	}

	s.Data[corev1.TLSPrivateKeyKey] = []byte("garbage")
	if _, err := Parse(s); err == nil {
		t.Error("a Secret with a broken key parsed")
	}
}

func splitPEM(b []byte) []string {
	var out []string
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return out
		}
		out = append(out, blk.Type)
	}
}
