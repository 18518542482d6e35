package kubelettest

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testwait"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/nodeenv"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/noderegistry"
	"github.com/kubeblade/kubeblade/test/kubelet/internal/podwait"
)

const (
	namespace   = "kubeblade-system"
	release     = "kubeblade"
	chartDir    = "deploy/helm/kubeblade"
	configName  = "default"
	agentDSName = "kubeblade-agent-" + configName
	// imageRepo of the chart's default image (values.yaml), and its
	// registry.
	defaultImageRepo     = "ghcr.io/kubeblade/kubeblade"
	defaultImageRegistry = "ghcr.io"
	// Waits: a cold node pulls only from the suite's registry on its own
	// bridge address, so these only bound a broken run.
	podWait = 3 * time.Minute
)

// agentSelector selects the default BladeConfig's agent pods (the labels
// the operator's DaemonSet gives them).
var agentSelector = labels.SelectorFromSet(labels.Set{
	"app.kubernetes.io/name": "kubeblade", "app.kubernetes.io/instance": configName, "app.kubernetes.io/component": "agent",
}).String()

// publishImage starts the registry (storage in dir), pushes the OCI
// layout to it as kubeblade/kubeblade under the layout's own tag and the
// chart's appVersion, and makes it the node's mirror of ghcr.io, so that
// the chart's default image (ghcr.io/kubeblade/kubeblade:<appVersion>),
// which the documented commands install, is pulled from it too.
func publishImage(ctx context.Context, dir, layout string) error {
	var err error
	// The node's bridge address, not loopback: the documented commands
	// (install.md, "Install from your own registry") run against it as
	// against a registry on the LAN, over HTTPS.
	if reg, err = noderegistry.Start(ctx, node, os.Getenv(EnvRegistry), dir, nodeenv.Gateway); err != nil {
		return err
	}
	tag, err := noderegistry.LayoutTag(layout)
	if err != nil {
		return err
	}
	ch, err := loader.Load(filepath.Join(repoRoot, chartDir))
	if err != nil {
		return err
	}
	tags := []string{tag}
	if app := ch.Metadata.AppVersion; app != tag {
		tags = append(tags, app)
	}
	repo := strings.TrimPrefix(defaultImageRepo, defaultImageRegistry+"/")
	if err := reg.PushImage(ctx, layout, repo, tags...); err != nil {
		return err
	}
	if err := reg.Mirror(defaultImageRegistry); err != nil {
		return err
	}
	imageRepo, imageTag = reg.Host+"/"+repo, tag
	return nil
}

// helmConfig is the Helm SDK's configuration for the release namespace,
// talking to the node's API server as the admin.
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := node.Kubeconfig, namespace
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(filepath.Join(repoRoot, chartDir))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// helmValues merges the values file and --set style overrides the way the
// helm CLI does (-f testdata/values.yaml --set ...), with the registry's
// image.
func helmValues(t *testing.T, set ...string) map[string]any {
	t.Helper()
	o := values.Options{
		ValueFiles: []string{"testdata/values.yaml"},
		Values:     append([]string{"image.repository=" + imageRepo, "image.tag=" + imageTag}, set...),
	}
	v, err := o.MergeValues(getter.All(cli.New()))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func helmInstall(t *testing.T, set ...string) {
	t.Helper()
	in := action.NewInstall(helmConfig(t))
	in.ReleaseName, in.Namespace = release, namespace
	in.WaitStrategy, in.Timeout = kube.StatusWatcherStrategy, podWait
	if _, err := in.RunWithContext(ctx(t), loadChart(t), helmValues(t, set...)); err != nil {
		t.Fatalf("helm install: %v", err)
	}
}

func helmUpgrade(t *testing.T, set ...string) {
	t.Helper()
	up := action.NewUpgrade(helmConfig(t))
	up.Namespace = namespace
	up.WaitStrategy, up.Timeout = kube.StatusWatcherStrategy, podWait
	if _, err := up.RunWithContext(ctx(t), release, loadChart(t), helmValues(t, set...)); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
}

func helmUninstall(t *testing.T) {
	t.Helper()
	un := action.NewUninstall(helmConfig(t))
	// As `helm uninstall` does by default: wait for the hooks (the
	// post-delete cleanup Job), not for every object to be gone — the
	// BladeConfig's finalizer is released by that very Job.
	un.WaitStrategy, un.Timeout = kube.HookOnlyStrategy, podWait
	if _, err := un.Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
}

// eventually is testwait.Eventually, ended early by an interrupt or a
// node component that died.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	c := ctx(t)
	err := testwait.Poll(c, timeout, func(ctx context.Context) (bool, string) {
		if err := node.Exited(); err != nil {
			return true, ""
		}
		return cond(ctx)
	})
	if err := node.Exited(); err != nil {
		t.Fatalf("waiting for %s: a node component died: %v", what, err)
	}
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; %v", timeout, what, err)
	}
}

var (
	kclientOnce sync.Once
	kclientC    client.Client
	kclientErr  error
)

// kclient is a controller-runtime client with kubeblade's types.
func kclient(t *testing.T) client.Client {
	t.Helper()
	kclientOnce.Do(func() {
		kclientC, kclientErr = client.New(node.Config, client.Options{Scheme: clientScheme()})
	})
	if kclientErr != nil {
		t.Fatal(kclientErr)
	}
	return kclientC
}

// waitPod returns the only running pod matching selector, once it is Ready
// (and, when cond is set, cond holds).
func waitPod(t *testing.T, selector, what string, cond func(*corev1.Pod) (bool, string)) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, podWait, what, podwait.Ready(node.Client, namespace, selector, cond, &pod))
	return pod
}

func getBlade(ctx context.Context, t *testing.T) (*kbv1.Blade, error) {
	b := &kbv1.Blade{}
	err := kclient(t).Get(ctx, client.ObjectKey{Name: nodeenv.NodeName}, b)
	return b, err
}

// simulator calls the agent's simulated-blade control socket, which is in
// the DaemonSet's state hostPath.
func simulator(t *testing.T, path string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", "/var/lib/kubeblade/simulator.sock")
		},
	}}
	resp, err := c.Post("http://blade"+path, "", nil)
	if err != nil {
		t.Fatalf("simulator %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("simulator %s: %s", path, resp.Status)
	}
}

// kubeletPodDir is where the kubelet keeps a pod's volumes.
func kubeletPodDir(p *corev1.Pod) string {
	return filepath.Join(node.KubeletRoot, "pods", string(p.UID))
}
