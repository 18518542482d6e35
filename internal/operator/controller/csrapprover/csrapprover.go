// Package csrapprover is the controller that approves an agent's serving
// certificate request (signer kubeblade.io/agent-serving) for the
// requester's own Node and denies the ones that ask for anything else, by
// the rules of package csrpolicy. It never approves client certificates.
package csrapprover

import (
	"context"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeblade/kubeblade/internal/operator/csrpolicy"
	"github.com/kubeblade/kubeblade/internal/operator/opmetrics"
)

// ControllerName names the approver controller.
const ControllerName = "csr-approver"

// Condition reasons the approver writes on CSRs.
const (
	ReasonAutoApproved = "KubebladeAgentOwnNode"
	ReasonDenied       = "KubebladePolicy"
)

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kubeblade.io/agent-serving,verbs=approve
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// Reconciler approves agent serving requests for the requester's own Node
// and denies the ones that ask for anything else.
type Reconciler struct {
	Client client.Client
	// APIReader reads Nodes directly (their addresses); the operator
	// caches only Node metadata.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// AgentUser is the agent ServiceAccount's user name,
	// system:serviceaccount:<namespace>:<name>.
	AgentUser string
}

// SetupWithManager registers the controller.
func (a *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&certv1.CertificateSigningRequest{}, builder.WithPredicates(csrpolicy.SignerIs(csrpolicy.SignerAgentServing))).
		Complete(a)
}

// Reconcile approves or denies one request.
func (a *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	c, err := csrpolicy.GetUnfinished(ctx, a.Client, req.NamespacedName)
	if err != nil || c == nil || c.Spec.SignerName != csrpolicy.SignerAgentServing || csrpolicy.Approved(c) {
		return ctrl.Result{}, err
	}
	_, _, verr := csrpolicy.Check(ctx, a.APIReader, a.AgentUser, c)
	cond := certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: ReasonAutoApproved,
		Message:        "kubeblade-operator approved the agent's serving certificate for its own node",
		LastUpdateTime: metav1.NewTime(a.Clock.Now()),
	}
	if verr != nil {
		if apierrors.IsNotFound(verr) || csrpolicy.IsTransient(verr) {
			return ctrl.Result{}, verr
		}
		cond.Type, cond.Reason, cond.Message = certv1.CertificateDenied, ReasonDenied, verr.Error()
	}
	c.Status.Conditions = append(c.Status.Conditions, cond)
	if err := a.Client.SubResource("approval").Update(ctx, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if verr != nil {
		opmetrics.CertificatesDenied.WithLabelValues(c.Spec.SignerName).Inc()
		log.Info("denied an agent certificate request", "csr", c.Name, "reason", verr.Error())
		a.event(c, corev1.EventTypeWarning, ReasonDenied, "Denied: %v", verr)
		return ctrl.Result{}, nil
	}
	log.Info("approved an agent certificate request", "csr", c.Name)
	a.event(c, corev1.EventTypeNormal, ReasonAutoApproved, "Approved for node %s", c.Spec.Extra[csrpolicy.NodeNameExtra][0])
	return ctrl.Result{}, nil
}

func (a *Reconciler) event(c *certv1.CertificateSigningRequest, typ, reason, msg string, args ...any) {
	if a.Recorder != nil {
		a.Recorder.Eventf(c, nil, typ, reason, "Approve", msg, args...)
	}
}
