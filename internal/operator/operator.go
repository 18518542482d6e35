// Package operator wires kubeblade-operator's controllers into a
// controller-runtime manager: assignment, DaemonSets, status, finalizer,
// CA rotation and the CSR approver and signer, each in its own package
// under controller/. It is the only package that imports them; they share
// building blocks (placement, agentdaemonset, nodemeta, casecret,
// csrpolicy, opmetrics), never each other. cmd/kubeblade-operator turns
// flags into Options; tests and the benchmark call the same Setup.
package operator

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/keymutex"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/operator/agentdaemonset"
	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/controller/assignment"
	"github.com/kubeblade/kubeblade/internal/operator/controller/carotation"
	"github.com/kubeblade/kubeblade/internal/operator/controller/csrapprover"
	"github.com/kubeblade/kubeblade/internal/operator/controller/csrsigner"
	"github.com/kubeblade/kubeblade/internal/operator/controller/daemonset"
	"github.com/kubeblade/kubeblade/internal/operator/controller/finalizer"
	"github.com/kubeblade/kubeblade/internal/operator/controller/maintenance"
	"github.com/kubeblade/kubeblade/internal/operator/controller/stale"
	"github.com/kubeblade/kubeblade/internal/operator/controller/status"
	"github.com/kubeblade/kubeblade/internal/operator/imagepolicy"
	"github.com/kubeblade/kubeblade/internal/operator/outcome"
)

// Name is the operator's name: its event reporter and leader-election ID.
const Name = "kubeblade-operator"

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "kubeblade-operator.kubeblade.io"

// Options configure the controllers.
type Options struct {
	// Namespace the operator, its DaemonSets and its CA Secret live in.
	Namespace string
	// DaemonSet defaults; its Namespace is set from Namespace.
	DaemonSet agentdaemonset.Defaults
	// AgentImages are the repositories a BladeConfig's spec.daemonSet.image
	// may name (the same list the admission policy kubeblade-agent-images
	// holds); any other image is not run. DaemonSet.Image, the operator's
	// own, is always allowed.
	AgentImages imagepolicy.AllowList
	// AgentServiceAccount is the agents' ServiceAccount name in Namespace.
	AgentServiceAccount string
	// CASecretName holds the CA (casecret.DefaultName if empty).
	CASecretName string
	// CALifetime and CertificateLifetime: see packages carotation and csrsigner.
	CALifetime          time.Duration
	CertificateLifetime time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// DefaultOptions are the operator's defaults.
func DefaultOptions() Options {
	return Options{
		Namespace:           "kubeblade-system",
		DaemonSet:           agentdaemonset.DefaultDefaults(),
		AgentImages:         imagepolicy.AllowList{imagepolicy.DefaultRepository},
		AgentServiceAccount: "kubeblade-agent",
		CASecretName:        casecret.DefaultName,
		CertificateLifetime: csrsigner.DefaultLifetime,
	}
}

// AgentUser is the user name the agents' tokens authenticate as.
func (o Options) AgentUser() string {
	return "system:serviceaccount:" + o.Namespace + ":" + o.AgentServiceAccount
}

// Scheme holds the built-in types and kubeblade's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := kbv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// ManagerOptions completes base with what the controllers need: the
// scheme and a cache that holds DaemonSets of one namespace and only the
// CA Secret, which is also all the operator's Roles allow.
func ManagerOptions(o Options, base ctrl.Options) ctrl.Options {
	base.Scheme = Scheme()
	secret := o.CASecretName
	if secret == "" {
		secret = casecret.DefaultName
	}
	if base.Cache.ByObject == nil {
		base.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	base.Cache.ByObject[&appsv1.DaemonSet{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{o.Namespace: {}},
	}
	base.Cache.ByObject[&corev1.Secret{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{o.Namespace: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", secret),
	}
	if base.LeaderElectionID == "" {
		base.LeaderElectionID = LeaderElectionID
	}
	if base.LeaderElectionNamespace == "" {
		base.LeaderElectionNamespace = o.Namespace
	}
	return base
}

// Leader election reads and renews one Lease (client-go's LeaseLock: get,
// create, update).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=kubeblade-system,resources=leases,resourceNames=kubeblade-operator.kubeblade.io,verbs=get;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=kubeblade-system,resources=leases,verbs=create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Setup registers every controller with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.DaemonSet.Namespace = o.Namespace
	if o.CASecretName == "" {
		o.CASecretName = casecret.DefaultName
	}
	rec := mgr.GetEventRecorder(Name)
	c := mgr.GetClient()
	// What the controllers met applying each BladeConfig, for its status.
	applied := outcome.New()
	caKey := types.NamespacedName{Namespace: o.Namespace, Name: o.CASecretName}
	wrap := func(name string, err error) error {
		if err != nil {
			return fmt.Errorf("setting up %s: %w", name, err)
		}
		return nil
	}
	if err := wrap(assignment.ControllerName, (&assignment.Reconciler{
		Client: c, Recorder: rec, Clock: o.Clock, Outcome: applied,
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	// The daemonset controller's applies and the finalizer controller's
	// cleanup of the same BladeConfig exclude each other.
	cleanup := keymutex.NewHashed(0)
	if err := wrap(daemonset.ControllerName, (&daemonset.Reconciler{
		Client: c, APIReader: mgr.GetAPIReader(), Cleanup: cleanup, Recorder: rec, Defaults: o.DaemonSet, Images: o.AgentImages, Outcome: applied,
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	if err := wrap(status.ControllerName, (&status.Reconciler{
		Client: c, Recorder: rec, Clock: o.Clock, Namespace: o.Namespace, Images: o.AgentImages, Outcome: applied,
		DefaultPriorityClass: o.DaemonSet.PriorityClassName,
	}).SetupWithManager(ctx, mgr)); err != nil {
		return err
	}
	if err := wrap(finalizer.ControllerName, (&finalizer.Reconciler{
		Client: c, APIReader: mgr.GetAPIReader(), Cleanup: cleanup, Recorder: rec, Namespace: o.Namespace,
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	if err := wrap(carotation.ControllerName, (&carotation.Reconciler{
		Client: c, Recorder: rec, Clock: o.Clock, Namespace: o.Namespace,
		SecretName: o.CASecretName, Lifetime: o.CALifetime,
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	if err := wrap(maintenance.ControllerName, (&maintenance.Reconciler{
		Client: c, APIReader: mgr.GetAPIReader(), Recorder: rec, Clock: o.Clock,
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	if err := wrap(stale.ControllerName, (&stale.Reconciler{
		Client: c, Recorder: rec, Clock: o.Clock,
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	if err := wrap(csrapprover.ControllerName, (&csrapprover.Reconciler{
		Client: c, APIReader: mgr.GetAPIReader(), Recorder: rec, Clock: o.Clock, AgentUser: o.AgentUser(),
	}).SetupWithManager(mgr)); err != nil {
		return err
	}
	return wrap(csrsigner.ControllerName, (&csrsigner.Reconciler{
		Client: c, APIReader: mgr.GetAPIReader(), Recorder: rec, Clock: o.Clock, AgentUser: o.AgentUser(),
		CASecret: caKey, Lifetime: o.CertificateLifetime,
	}).SetupWithManager(mgr))
}
