// Command kubeblade-operator turns BladeConfigs into agent DaemonSets,
// assigns blades to configs, signs agent and client certificates and
// reports status. `kubeblade-operator cleanup` removes kubeblade's labels,
// taints and conditions from every Node (a Helm pre-delete hook).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubeblade/kubeblade/internal/logging"
	"github.com/kubeblade/kubeblade/internal/operator"
	"github.com/kubeblade/kubeblade/internal/operator/uninstall"
	"github.com/kubeblade/kubeblade/internal/opsserver"
	"github.com/kubeblade/kubeblade/internal/version"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "kubeblade-operator:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

type flags struct {
	opts                         operator.Options
	metricsAddr, probeAddr       string
	leaderElect                  bool
	qps                          float64
	burst                        int
	logLevel, logFormat          string
	showVersion                  bool
	pullPolicy                   string
	cleanupOnly                  bool
	leaseDuration, renewDeadline time.Duration
	stalledAfter                 time.Duration
}

func parse(args []string) (*flags, error) {
	f := &flags{opts: operator.DefaultOptions()}
	cleanupCmd := len(args) > 0 && args[0] == "cleanup"
	if cleanupCmd {
		args = args[1:]
	}
	fs := flag.NewFlagSet("kubeblade-operator", flag.ContinueOnError)
	fs.StringVar(&f.opts.Namespace, "namespace", envOr("POD_NAMESPACE", f.opts.Namespace), "namespace of the operator, its DaemonSets, CA Secret and Lease (default $POD_NAMESPACE)")
	fs.StringVar(&f.opts.DaemonSet.Image, "agent-image", os.Getenv("AGENT_IMAGE"), "agent image when a BladeConfig names none; normally the operator's own image (default $AGENT_IMAGE)")
	fs.StringVar(&f.pullPolicy, "agent-image-pull-policy", string(f.opts.DaemonSet.ImagePullPolicy), "agent pull policy when a BladeConfig names none")
	fs.StringVar(&f.opts.AgentServiceAccount, "agent-service-account", f.opts.AgentServiceAccount, "ServiceAccount the agents run as, in --namespace")
	fs.StringVar(&f.opts.DaemonSet.PriorityClassName, "agent-priority-class", f.opts.DaemonSet.PriorityClassName, "agent PriorityClass when a BladeConfig names none")
	fs.StringVar(&f.opts.CASecretName, "ca-secret", f.opts.CASecretName, "Secret in --namespace holding the CA")
	fs.DurationVar(&f.opts.CALifetime, "ca-lifetime", 0, "lifetime of a new CA (default 10 years); rotated after two thirds")
	fs.DurationVar(&f.opts.CertificateLifetime, "certificate-lifetime", f.opts.CertificateLifetime, "lifetime of signed certificates (a request may ask for less)")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "metrics endpoint address; 0 disables it")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect a leader, so only one replica acts")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "leader lease duration")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "leader renew deadline")
	fs.DurationVar(&f.stalledAfter, "stalled-reconcile-after", 2*time.Minute, "/healthz fails (and the kubelet restarts the operator) when one reconcile has run this long")
	fs.Float64Var(&f.qps, "kube-api-qps", 200, "client-side limit of API requests per second")
	fs.IntVar(&f.burst, "kube-api-burst", 400, "client-side burst of API requests")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "json", "text or json")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kubeblade-operator [flags]\n       kubeblade-operator cleanup [--namespace NS]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.cleanupOnly = cleanupCmd
	f.opts.DaemonSet.ImagePullPolicy = corev1.PullPolicy(f.pullPolicy)
	return f, nil
}

func run(args []string) error {
	f, err := parse(args)
	if err != nil {
		return err
	}
	if f.showVersion {
		fmt.Println(version.Get().String())
		return nil
	}
	slogger, err := logging.New(os.Stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.FromSlogHandler(slogger.Handler()))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	cfg.UserAgent = operator.Name + "/" + version.Get().Version
	ctx := ctrl.SetupSignalHandler()

	if f.cleanupOnly {
		return runCleanup(ctx, f, cfg)
	}
	if f.opts.DaemonSet.Image == "" {
		return errors.New("no agent image: set --agent-image or $AGENT_IMAGE (the chart sets it to the operator's own image)")
	}
	mgr, err := ctrl.NewManager(cfg, operator.ManagerOptions(f.opts, ctrl.Options{
		Metrics:                       metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:        f.probeAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &f.leaseDuration,
		RenewDeadline:                 &f.renewDeadline,
	}))
	if err != nil {
		return err
	}
	if err := operator.Setup(ctx, mgr, f.opts); err != nil {
		return err
	}
	// Live while no controller is stuck in one reconcile (controller-runtime
	// reports each workqueue's oldest running item in its metrics registry);
	// ready once the informer caches have synced, and while live.
	reconcilers := opsserver.StalledWorkqueues(ctrlmetrics.Registry, f.stalledAfter)
	if err := mgr.AddHealthzCheck("reconcilers", func(*http.Request) error { return reconcilers() }); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("reconcilers", func(*http.Request) error { return reconcilers() }); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	slogger.Info("starting kubeblade-operator", "version", version.Get().Version, "namespace", f.opts.Namespace)
	return mgr.Start(ctx)
}

func runCleanup(ctx context.Context, f *flags, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return err
	}
	rep, err := uninstall.Uninstall(ctx, c, f.opts.Namespace)
	fmt.Printf("cleanup: deleted %d DaemonSet(s), released %d BladeConfig finalizer(s), cleaned %d of %d node(s)\n",
		rep.DaemonSets, rep.Finalizers, rep.NodeChanges, rep.Nodes)
	return err
}
