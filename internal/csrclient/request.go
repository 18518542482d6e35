package csrclient

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeblade/kubeblade/internal/kubeclient"
)

// This file does what client-go's util/certificate/csr does for
// certificates.k8s.io/v1 (RequestCertificateWithContext and
// WaitForCertificate) over CSRAPI. That package takes a
// kubernetes.Interface, whose scheme links every built-in API group into
// the agent.

// create creates obj or, when a request of that name exists already,
// adopts it if it asks the same signer for a certificate of key. It
// returns the request's name and UID.
func create(ctx context.Context, csrs CSRAPI, obj *certv1.CertificateSigningRequest, key crypto.Signer) (string, types.UID, error) {
	made, err := csrs.Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		return made.Name, made.UID, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", "", err
	}
	// The name embeds a hash of the public key, so this is most likely our
	// own earlier Create whose answer was lost.
	old, gerr := csrs.Get(ctx, obj.Name, metav1.GetOptions{})
	if gerr != nil {
		return "", "", fmt.Errorf("it exists already and cannot be read: %w", gerr)
	}
	if err := compatible(old, obj.Spec.SignerName, key); err != nil {
		return "", "", fmt.Errorf("it exists already and is not ours to wait for: %w", err)
	}
	return old.Name, old.UID, nil
}

// compatible says whether an existing request asks signer for a
// certificate of key's public key, signed with key.
func compatible(old *certv1.CertificateSigningRequest, signer string, key crypto.Signer) error {
	if old.Spec.SignerName != signer {
		return fmt.Errorf("it asks signer %q, not %q", old.Spec.SignerName, signer)
	}
	b, _ := pem.Decode(old.Spec.Request)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return errors.New("its spec.request holds no PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return fmt.Errorf("its spec.request: %w", err)
	}
	pub, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return errors.New("its request is for a different public key")
	}
	if err := req.CheckSignature(); err != nil {
		return fmt.Errorf("its request is not signed by our key: %w", err)
	}
	return nil
}

// waitForCertificate waits until the request name (with UID uid) is
// approved and signed, and returns status.certificate. It fails when the
// request is denied, fails, is deleted or replaced (another UID), and when
// ctx ends.
func waitForCertificate(ctx context.Context, csrs CSRAPI, name string, uid types.UID) ([]byte, error) {
	// A client may say it cannot stream lists (client-go's fakes do).
	lw := cache.ToListWatcherWithWatchListSemantics(kubeclient.ListWatchNamed[*certv1.CertificateSigningRequestList](csrs, name), csrs)
	// No precondition: checking the synced store would poll HasSynced. As
	// in client-go, a request deleted before the first list is waited for
	// until ctx ends.
	ev, err := watchtools.UntilWithSync(ctx, lw, &certv1.CertificateSigningRequest{}, nil, func(ev watch.Event) (bool, error) {
		return issued(ev, name, uid)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("not issued in time: %w", ctx.Err())
		}
		return nil, err
	}
	return ev.Object.(*certv1.CertificateSigningRequest).Status.Certificate, nil
}

// issued is the condition of waitForCertificate, as in client-go's
// csr.WaitForCertificate.
func issued(ev watch.Event, name string, uid types.UID) (bool, error) {
	switch ev.Type {
	case watch.Added, watch.Modified:
	case watch.Deleted:
		return false, fmt.Errorf("CertificateSigningRequest %s was deleted", name)
	default:
		return false, nil
	}
	c, ok := ev.Object.(*certv1.CertificateSigningRequest)
	if !ok {
		return false, fmt.Errorf("unexpected %T in a CertificateSigningRequest watch", ev.Object)
	}
	if c.UID != uid {
		return false, fmt.Errorf("CertificateSigningRequest %s was replaced (UID %s, not %s)", name, c.UID, uid)
	}
	approved := false
	for _, cond := range c.Status.Conditions {
		// Like client-go, a condition counts by its type (the API server
		// admits Approved and Denied only with status True).
		switch cond.Type {
		case certv1.CertificateDenied:
			return false, fmt.Errorf("CertificateSigningRequest %s was denied, reason: %s, message: %s", name, cond.Reason, cond.Message)
		case certv1.CertificateFailed:
			return false, fmt.Errorf("CertificateSigningRequest %s failed, reason: %s, message: %s", name, cond.Reason, cond.Message)
		case certv1.CertificateApproved:
			approved = true
		}
	}
	return approved && len(c.Status.Certificate) > 0, nil
}
