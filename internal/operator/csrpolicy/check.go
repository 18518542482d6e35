package csrpolicy

import (
	"context"
	"crypto/x509"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kubeblade/kubeblade/internal/pki"
)

// GetUnfinished reads the request named key. It returns nil and no error
// when there is nothing left to do for either controller: the request is
// gone, or it is finished (issued, denied or failed).
func GetUnfinished(ctx context.Context, r client.Reader, key types.NamespacedName) (*certv1.CertificateSigningRequest, error) {
	c := &certv1.CertificateSigningRequest{}
	if err := r.Get(ctx, key, c); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if Finished(c) {
		return nil, nil
	}
	return c, nil
}

// transientError marks failures worth a retry, not a denial.
type transientError struct{ error }

func (e transientError) Unwrap() error { return e.error }

// IsTransient reports an error of Check worth a retry, not a denial.
func IsTransient(err error) bool {
	_, ok := err.(transientError)
	return ok
}

// Check validates c for its signer name and returns the parsed
// request and the usage to sign it for. Agent serving requests are checked
// against the requester's Node, read through nodes: a Node that does not
// exist has no addresses (only loopback IPs pass); failing to read it is a
// transientError, to retry rather than deny.
func Check(ctx context.Context, nodes client.Reader, agentUser string, c *certv1.CertificateSigningRequest) (*x509.CertificateRequest, pki.Usage, error) {
	x, err := ParseRequest(c)
	if err != nil {
		return nil, 0, err
	}
	if c.Spec.SignerName != SignerAgentServing {
		if err := ValidateClient(c, x); err != nil {
			return nil, 0, err
		}
		return x, pki.UsageClient, nil
	}
	name, err := RequesterNode(c, agentUser)
	if err != nil {
		return nil, 0, err
	}
	node := &corev1.Node{}
	if err := nodes.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, 0, transientError{err}
		}
		node = nil
	}
	if _, err := ValidateAgentServing(c, x, agentUser, node); err != nil {
		return nil, 0, err
	}
	return x, pki.UsageServer, nil
}

// SignerIs passes CertificateSigningRequests for one of the signer names.
func SignerIs(names ...string) predicate.Funcs {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		c, ok := o.(*certv1.CertificateSigningRequest)
		if !ok {
			return false
		}
		for _, n := range names {
			if c.Spec.SignerName == n {
				return true
			}
		}
		return false
	})
}
