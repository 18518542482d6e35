//go:build !nokube

package agentd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/csrclient"
	"github.com/kubeblade/kubeblade/internal/grpcapi"
	"github.com/kubeblade/kubeblade/internal/kubeagent"
	"github.com/kubeblade/kubeblade/internal/kubeclient"
	"github.com/kubeblade/kubeblade/internal/metrics"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// KubernetesSupported reports whether this build has the Kubernetes mode
// (builds with -tags nokube leave the Kubernetes client out to stay small).
const KubernetesSupported = true

// KubernetesOptions configure the Kubernetes mode.
type KubernetesOptions struct {
	// Kubeconfig is a kubeconfig path; empty means in-cluster, then
	// $KUBECONFIG and ~/.kube/config.
	Kubeconfig string
	// Config, when set, is used instead of Kubeconfig (tests).
	Config   *rest.Config
	NodeName string
	// Heartbeat and MinInterval tune Blade status writes (kubeagent
	// defaults when zero).
	Heartbeat, MinInterval time.Duration
}

func (k *KubernetesOptions) restConfig() (*rest.Config, error) {
	if k.Config != nil {
		return k.Config, nil
	}
	if k.Kubeconfig == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	k.Config = cfg
	return cfg, nil
}

// kubeInitial is the agent's first read of its Node and BladeConfig,
// which the Kubernetes reporter's watches start from.
type kubeInitial = kubeagent.Initial

// bootstrapConfig returns the agent config of the BladeConfig this Node is
// assigned to, or local when there is none or the API server does not
// answer soon: a blade must start protecting itself without the cluster.
// It also returns what it read (nil if nothing), which the reporter's
// watches start from instead of reading the same objects again.
func bootstrapConfig(ctx context.Context, o Options, local config.Checked) (config.Checked, *kubeInitial) {
	log := o.Logger
	rc, err := o.Kubernetes.restConfig()
	if err != nil {
		log.Warn("starting with the local config", "err", err)
		return local, nil
	}
	ctx, cancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer cancel()
	in, err := kubeagent.ReadInitial(ctx, rc, o.Kubernetes.NodeName)
	if in == nil {
		log.Warn("could not read this Node; starting with the local config", "err", err)
		return local, nil
	}
	if err != nil {
		log.Warn("could not read the assigned BladeConfig; starting with the local config", "bladeConfig", in.ConfigName, "err", err)
		return local, in
	}
	if in.NodeObject() == nil {
		log.Warn("this Node does not exist (yet); starting with the local config", "node", o.Kubernetes.NodeName)
		return local, in
	}
	if in.ConfigName == "" {
		return local, in
	}
	bc := in.ConfigObject()
	if bc == nil {
		log.Warn("the assigned BladeConfig does not exist; starting with the local config", "bladeConfig", in.ConfigName)
		return local, in
	}
	cfg, err := config.FromSpec(bc.Spec.Agent, o.Environ)
	if err == nil {
		log.Info("starting with the assigned BladeConfig", "bladeConfig", bc.Name, "generation", bc.Generation)
		return cfg, in
	}
	log.Error("the assigned BladeConfig is invalid; starting with the local config", "bladeConfig", bc.Name, "err", err)
	return local, in
}

// bootstrapTimeout bounds how long start-up waits for the API server.
const bootstrapTimeout = 10 * time.Second

func newKubeReporter(o Options, a *agent.Agent, cfg config.Checked, initial *kubeInitial) (KubeReporter, prometheus.Collector, error) {
	k := o.Kubernetes
	if k.NodeName == "" {
		return nil, nil, errors.New("kubernetes mode needs the node name: set NODE_NAME (the DaemonSet does, from spec.nodeName) or --node-name")
	}
	rc, err := k.restConfig()
	if err != nil {
		return nil, nil, err
	}
	// client-go logs through klog; send it to the process's structured log.
	// klog's logger is the process's: set once, before any client reads it
	// (a second daemon in one process, as in the tests, set it again while
	// the first one's clients read it: a data race).
	klogOnce.Do(func() { klog.SetSlogLogger(o.Logger) })
	rep, err := kubeagent.New(kubeagent.Options{
		Config: rc, NodeName: k.NodeName, Agent: a, Local: cfg, Environ: o.Environ, Initial: initial,
		Heartbeat: k.Heartbeat, MinInterval: k.MinInterval, Clock: o.Clock, Logger: o.Logger,
	})
	if err != nil {
		return nil, nil, err
	}
	collector := metrics.NewKubeCollector(func() metrics.KubeStats {
		s := rep.Stats()
		return metrics.KubeStats{Connected: s.Connected, Requests: s.Requests, Writes: s.Writes,
			EventsPending: s.Events.Pending, EventsSent: s.Events.Sent, EventsDrop: s.Events.Dropped}
	})
	return rep, collector, nil
}

// startClusterTLS serves mutual TLS with a certificate the operator signs
// through the CertificateSigningRequest API; the key never leaves the state
// directory. Getting the certificate waits for the operator, so it happens
// in the background: the blade is protected and the unix socket serves
// meanwhile.
func startClusterTLS(o Options, d *Daemon, srv *grpcapi.Server, goServe func(string, func(context.Context) error)) error {
	rc, err := o.Kubernetes.restConfig()
	if err != nil {
		return err
	}
	cs, err := kubeclient.New(rc)
	if err != nil {
		return fmt.Errorf("gRPC certificates: %w", err)
	}
	tcp, err := listenRemote(o, d)
	if err != nil {
		return err
	}
	goServe("gRPC mTLS listener", func(ctx context.Context) error {
		defer tcp.Close()
		var src *csrclient.Source
		for backoff := time.Second; ; backoff = min(2*backoff, time.Minute) {
			src, err = csrclient.New(ctx, csrclient.Options{
				CSRs: cs.CSRs, Nodes: cs.Nodes, Dir: o.StateDir, NodeName: o.Kubernetes.NodeName, Clock: o.Clock, Logger: o.Logger,
			})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			o.Logger.Warn("no serving certificate from the cluster yet; remote gRPC waits", "err", err, "retryIn", backoff)
			t := o.Clock.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
		o.Logger.Info("gRPC remote access enabled (mutual TLS, certificate signed by the cluster)", "address", d.GRPCAddr, "notAfter", src.NotAfter())
		go func() { _ = src.Run(ctx) }()
		return srv.Serve(ctx, tcp, pki.ServerTLSConfig(src))
	})
	return nil
}

// klogOnce sets klog's process-wide logger once.
var klogOnce sync.Once
