// Package ca keeps the operator's certificate authority in a Secret: the
// controller creates it when absent and rotates it before it expires,
// keeping the previous CA in the trust bundle until it expires, so
// certificates signed before a rotation stay trusted for their lifetime.
package ca

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	"github.com/kubeblade/kubeblade/internal/operator/opmetrics"
	"github.com/kubeblade/kubeblade/internal/pki"
)

const (
	// ControllerName names the controller.
	ControllerName = "ca-rotation"
	// DefaultSecretName is the Secret holding the CA.
	DefaultSecretName = "kubeblade-ca"
	// KeyBundle holds every CA certificate still trusted, newest first.
	KeyBundle = "ca.crt"
	// CommonName of the CA certificates.
	CommonName = "kubeblade-operator-ca"
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

// Authority is the CA that signs and the certificates clients should trust.
type Authority struct {
	CA *pki.CA
	// BundlePEM is every CA certificate still trusted, the signing one first.
	BundlePEM []byte
}

// Load reads the Authority from its Secret.
func Load(ctx context.Context, c client.Reader, key types.NamespacedName) (*Authority, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return nil, err
	}
	return parse(s)
}

func parse(s *corev1.Secret) (*Authority, error) {
	ca, err := pki.LoadCA(pki.KeyPair{CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey]})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	bundle := s.Data[KeyBundle]
	if len(bundle) == 0 {
		bundle = s.Data[corev1.TLSCertKey]
	}
	return &Authority{CA: ca, BundlePEM: bundle}, nil
}

// Reconciler creates and rotates the CA Secret.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Namespace string
	// SecretName defaults to DefaultSecretName.
	SecretName string
	// Lifetime of a new CA (pki.CALifetime if zero). It is rotated once
	// two thirds of it have passed.
	Lifetime time.Duration
}

func (r *Reconciler) key() types.NamespacedName {
	name := r.SecretName
	if name == "" {
		name = DefaultSecretName
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
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.key().Namespace, Name: r.key().Name,
			Labels: map[string]string{"app.kubernetes.io/name": "kubeblade", "app.kubernetes.io/component": "ca"}},
			Type: corev1.SecretTypeTLS}
		notAfter, err := r.fill(s, nil, now)
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
	a, perr := parse(s)
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
	notAfter, err := r.fill(s, old, now)
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

// fill puts a new CA into s, followed in the bundle by the certificates of
// oldBundle that have not expired.
func (r *Reconciler) fill(s *corev1.Secret, oldBundle []byte, now time.Time) (time.Time, error) {
	ca, kp, err := pki.NewCA(CommonName, now, r.Lifetime)
	if err != nil {
		return time.Time{}, err
	}
	bundle := bytes.Clone(kp.CertPEM)
	for rest := oldBundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil || !now.Before(c.NotAfter) {
			continue
		}
		bundle = append(bundle, pem.EncodeToMemory(b)...)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[corev1.TLSCertKey] = kp.CertPEM
	s.Data[corev1.TLSPrivateKeyKey] = kp.KeyPEM
	s.Data[KeyBundle] = bundle
	return ca.Cert.NotAfter, nil
}

func (r *Reconciler) event(s *corev1.Secret, typ, reason, msg string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, typ, reason, "Rotate", msg, args...)
	}
}
