// Package carotation is the controller that keeps the operator's
// certificate authority in its Secret (format: package casecret): it
// creates it when absent and rotates it before it expires, keeping the
// previous CA in the trust bundle until it expires, so certificates signed
// before a rotation stay trusted for their lifetime.
package carotation

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/opmetrics"
	"github.com/kubeblade/kubeblade/internal/pki"
)

const (
	// ControllerName names the controller.
	ControllerName = "ca-rotation"
	// maxRequeue bounds the wait until the next check, so a clock jump or
	// a missed event is noticed within a day.
	maxRequeue = 12 * time.Hour
)

// Event reasons on the Secret.
const (
	ReasonCreated = "CACreated"
	ReasonRotated = "CARotated"
	ReasonInvalid = "CAInvalid"
)

// +kubebuilder:rbac:groups="",namespace=kubeblade-system,resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler creates and rotates the CA Secret.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Namespace string
	// SecretName defaults to casecret.DefaultName.
	SecretName string
	// Lifetime of a new CA (pki.CALifetime if zero). It is rotated once
	// two thirds of it have passed.
	Lifetime time.Duration
}

func (r *Reconciler) key() types.NamespacedName {
	name := r.SecretName
	if name == "" {
		name = casecret.DefaultName
	}
	return types.NamespacedName{Namespace: r.Namespace, Name: name}
}

// SetupWithManager registers the controller. Its one work item is queued at
// start, so a missing Secret gets created without any event.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := r.key()
	initial := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: key})
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == key.Namespace && o.GetName() == key.Name
		}))).
		WatchesRawSource(initial).
		Complete(r)
}

// Reconcile makes sure a valid CA exists and schedules its rotation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	now := r.Clock.Now()
	s := &corev1.Secret{}
	err := r.Client.Get(ctx, r.key(), s)
	if apierrors.IsNotFound(err) {
		s = casecret.New(r.key())
		notAfter, err := casecret.Fill(s, nil, now, r.Lifetime)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Create(ctx, s); err != nil {
			return ctrl.Result{}, err // AlreadyExists: another writer won; retried
		}
		opmetrics.CertificateExpiry.WithLabelValues("ca").Set(float64(notAfter.Unix()))
		log.Info("created the certificate authority", "secret", r.key(), "notAfter", notAfter)
		r.event(s, corev1.EventTypeNormal, ReasonCreated, "Created CA valid until %s", notAfter.Format(time.RFC3339))
		return r.requeue(notAfter, now), nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	a, perr := casecret.Parse(s)
	if perr == nil {
		opmetrics.CertificateExpiry.WithLabelValues("ca").Set(float64(a.CA.Cert.NotAfter.Unix()))
	}
	if perr == nil && !pki.NeedsRenewal(a.CA.Cert, now) {
		return ctrl.Result{RequeueAfter: min(maxRequeue, pki.RenewalTime(a.CA.Cert).Sub(now))}, nil
	}
	var old []byte
	if perr != nil {
		log.Error(perr, "the CA Secret is unusable; replacing it")
		r.event(s, corev1.EventTypeWarning, ReasonInvalid, "Replacing an unusable CA: %v", perr)
	} else {
		old = a.BundlePEM
	}
	notAfter, err := casecret.Fill(s, old, now, r.Lifetime)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Update carries the resourceVersion read above: two operators racing
	// cannot both rotate.
	if err := r.Client.Update(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	opmetrics.CertificateExpiry.WithLabelValues("ca").Set(float64(notAfter.Unix()))
	log.Info("rotated the certificate authority", "secret", r.key(), "notAfter", notAfter)
	r.event(s, corev1.EventTypeNormal, ReasonRotated, "Rotated CA; the new one is valid until %s", notAfter.Format(time.RFC3339))
	return r.requeue(notAfter, now), nil
}

func (r *Reconciler) requeue(notAfter, now time.Time) ctrl.Result {
	life := notAfter.Sub(now)
	return ctrl.Result{RequeueAfter: min(maxRequeue, life-life/3)}
}

func (r *Reconciler) event(s *corev1.Secret, typ, reason, msg string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, typ, reason, "Rotate", msg, args...)
	}
}
