// Package csrsigner is the controller that signs approved requests for
// kubeblade's signer names with the CA kept in the Secret of package
// casecret. It checks agent serving requests again by the rules of package
// csrpolicy, so a mistaken manual approval cannot give an agent a
// certificate for another Node.
package csrsigner

import (
	"context"
	"fmt"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/csrpolicy"
	"github.com/kubeblade/kubeblade/internal/operator/opmetrics"
)

const (
	// ControllerName names the signer controller.
	ControllerName = "csr-signer"
	// DefaultLifetime of signed certificates; a request may ask for less
	// with spec.expirationSeconds. Agents renew after two thirds.
	DefaultLifetime = 90 * 24 * time.Hour
)

// Condition and Event reasons the signer writes on CSRs.
const (
	ReasonSignFailed = "KubebladeSignFailed"
	ReasonSigned     = "Signed"
)

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/status,verbs=update;patch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kubeblade.io/agent-serving;kubeblade.io/client,verbs=sign
// +kubebuilder:rbac:groups="",namespace=kubeblade-system,resources=secrets,verbs=get;list;watch

// Reconciler signs approved requests for kubeblade's signer names. It checks
// agent serving requests again itself, so a mistaken manual approval cannot
// give an agent a certificate for another Node.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	AgentUser string
	// CASecret is where the CA is kept (format: package casecret).
	CASecret types.NamespacedName
	// Lifetime defaults to DefaultLifetime.
	Lifetime time.Duration
}

// SetupWithManager registers the controller.
func (s *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&certv1.CertificateSigningRequest{}, builder.WithPredicates(csrpolicy.SignerIs(csrpolicy.SignerAgentServing, csrpolicy.SignerClient))).
		Complete(s)
}

// Reconcile signs one approved request.
func (s *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	c, err := csrpolicy.GetUnfinished(ctx, s.Client, req.NamespacedName)
	if err != nil || c == nil || !csrpolicy.Approved(c) {
		return ctrl.Result{}, err
	}
	x, usage, verr := csrpolicy.Check(ctx, s.APIReader, s.AgentUser, c)
	if csrpolicy.IsTransient(verr) {
		return ctrl.Result{}, verr
	}
	if verr != nil {
		return ctrl.Result{}, s.fail(ctx, c, verr)
	}
	authority, err := casecret.Load(ctx, s.Client, s.CASecret)
	if err != nil {
		// The CA controller creates it; retry with backoff.
		return ctrl.Result{}, fmt.Errorf("loading the CA: %w", err)
	}
	lifetime := s.Lifetime
	if lifetime <= 0 {
		lifetime = DefaultLifetime
	}
	if c.Spec.ExpirationSeconds != nil {
		lifetime = min(lifetime, time.Duration(*c.Spec.ExpirationSeconds)*time.Second)
	}
	leaf, err := csrpolicy.Sign(authority.CA, x, usage, s.Clock.Now(), lifetime)
	if err != nil {
		return ctrl.Result{}, s.fail(ctx, c, err)
	}
	// The issued certificate comes first, then the trust bundle: the
	// requester learns which CAs to trust from the API server it already
	// trusts, so no ConfigMap has to carry them.
	c.Status.Certificate = append(leaf, authority.BundlePEM...)
	if err := s.Client.Status().Update(ctx, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	opmetrics.CertificatesSigned.WithLabelValues(c.Spec.SignerName).Inc()
	log.Info("signed a certificate", "csr", c.Name, "signer", c.Spec.SignerName)
	if s.Recorder != nil {
		s.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonSigned, "Sign", "Signed by %s", c.Spec.SignerName)
	}
	return ctrl.Result{}, nil
}

func (s *Reconciler) fail(ctx context.Context, c *certv1.CertificateSigningRequest, cause error) error {
	c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: ReasonSignFailed,
		Message: cause.Error(), LastUpdateTime: metav1.NewTime(s.Clock.Now()),
	})
	if err := s.Client.Status().Update(ctx, c); err != nil {
		return client.IgnoreNotFound(err)
	}
	opmetrics.CertificatesDenied.WithLabelValues(c.Spec.SignerName).Inc()
	if s.Recorder != nil {
		s.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonSignFailed, "Sign", "Not signed: %v", cause)
	}
	return nil
}
