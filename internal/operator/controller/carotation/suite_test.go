package carotation_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/casecret"
	"github.com/kubeblade/kubeblade/internal/operator/controller/carotation"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// The CA rotation controller runs alone.
var suite = optest.NewSuite(func(_ context.Context, mgr ctrl.Manager, o operator.Options) error {
	return (&carotation.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(operator.Name), Clock: o.Clock,
		Namespace: o.Namespace, SecretName: o.CASecretName}).SetupWithManager(mgr)
})

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

// waitCA waits for a valid CA other than not (nil: any) in the Secret.
func waitCA(t *testing.T, e *optest.Env, what string, not *casecret.Authority) *casecret.Authority {
	t.Helper()
	key := types.NamespacedName{Namespace: optest.Namespace, Name: casecret.DefaultName}
	var a *casecret.Authority
	testwait.Eventually(t, optest.Timeout, what, func(ctx context.Context) (bool, string) {
		var err error
		if a, err = casecret.Load(ctx, e.Client, key); err != nil {
			return false, err.Error()
		}
		return not == nil || !a.CA.Cert.Equal(not.CA.Cert), "the old CA is still there"
	})
	return a
}

func TestCreatedAtStartAndReplaced(t *testing.T) {
	e := suite.Need(t)
	// Nothing but the start of the controller asks for it.
	first := waitCA(t, e, "the CA Secret", nil)
	if first.CA.Cert.Subject.CommonName != casecret.CommonName {
		t.Errorf("CA common name %q", first.CA.Cert.Subject.CommonName)
	}
	e.WaitEvent(t, "Secret", casecret.DefaultName, carotation.ReasonCreated)

	// A corrupt Secret is replaced by a new CA.
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: optest.Namespace, Name: casecret.DefaultName}
	if err := e.Client.Get(optest.Ctx(t), key, s); err != nil {
		t.Fatal(err)
	}
	s.Data[corev1.TLSPrivateKeyKey] = []byte("garbage")
	if err := e.Client.Update(optest.Ctx(t), s); err != nil {
		t.Fatal(err)
	}
	second := waitCA(t, e, "the corrupt CA replaced", first)
	e.WaitEvent(t, "Secret", casecret.DefaultName, carotation.ReasonInvalid)

	// A deleted Secret is created again.
	if err := e.Client.Delete(optest.Ctx(t), s); err != nil {
		t.Fatal(err)
	}
	waitCA(t, e, "the deleted CA recreated", second)
}
