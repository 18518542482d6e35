package operator_test

import (
	"context"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/optest"
)

// The whole operator, as cmd/kubeblade-operator runs it. Each controller's
// own behaviour is tested in its package; these tests cover what needs
// them together and what is not a controller (the admission policy, the
// uninstall command).
var suite = optest.NewSuite(func(ctx context.Context, mgr ctrl.Manager, o operator.Options) error {
	return operator.Setup(ctx, mgr, o)
})

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
