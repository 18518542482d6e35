//go:build nokube

package agentd

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/grpcapi"
)

// KubernetesSupported reports whether this build has the Kubernetes mode.
const KubernetesSupported = false

// KubernetesOptions configure the Kubernetes mode, which this build lacks.
type KubernetesOptions struct {
	Kubeconfig             string
	NodeName               string
	Heartbeat, MinInterval time.Duration
}

var errNoKube = errors.New("this kubeblade-agent was built without Kubernetes support (-tags nokube); use the full build for --kubernetes")

// kubeInitial is empty: this build reads nothing from Kubernetes.
type kubeInitial struct{}

func bootstrapConfig(_ context.Context, _ Options, local config.Checked) (config.Checked, *kubeInitial) {
	return local, nil
}

func newKubeReporter(Options, *agent.Agent, config.Checked, *kubeInitial) (KubeReporter, prometheus.Collector, error) {
	return nil, nil, errNoKube
}

func startClusterTLS(Options, *Daemon, *grpcapi.Server, func(string, func(context.Context) error)) error {
	return errNoKube
}
