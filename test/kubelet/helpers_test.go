package kubelettest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
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
	"github.com/kubeblade/kubeblade/test/kubelet/internal/podwait"
)

const (
	namespace   = "kubeblade-system"
	release     = "kubeblade"
	chartDir    = "deploy/helm/kubeblade"
	configName  = "default"
	agentDSName = "kubeblade-agent-" + configName
	// imageRepo of the chart's default image (values.yaml).
	defaultImageRepo = "ghcr.io/kubeblade/kubeblade"
	// Waits: a cold node pulls nothing (images are imported), so these
	// only bound a broken run.
	podWait = 3 * time.Minute
)

// agentSelector selects the default BladeConfig's agent pods (the labels
// the operator's DaemonSet gives them).
var agentSelector = labels.SelectorFromSet(labels.Set{
	"app.kubernetes.io/name": "kubeblade", "app.kubernetes.io/instance": configName, "app.kubernetes.io/component": "agent",
}).String()

// importImage imports the OCI layout into containerd under
// defaultImageRepo with its own tag, and also tags it with the chart's
// appVersion, the tag the documented commands install.
func importImage(ctx context.Context, layout string) error {
	tarPath := filepath.Join(nodeenv.StateDir, "kubeblade-image.tar")
	if out, err := exec.CommandContext(ctx, "tar", "-C", layout, "-cf", tarPath, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar %s: %v: %s", layout, err, out)
	}
	defer os.Remove(tarPath)
	if _, err := node.Ctr(ctx, "images", "import", "--platform", "linux/amd64", "--base-name", defaultImageRepo, tarPath); err != nil {
		return err
	}
	out, err := node.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return err
	}
	for _, ref := range strings.Fields(out) {
		if tag, ok := strings.CutPrefix(ref, defaultImageRepo+":"); ok {
			imageRepo, imageTag = defaultImageRepo, tag
		}
	}
	if imageTag == "" {
		return fmt.Errorf("no %s image after the import; images: %s", defaultImageRepo, out)
	}
	ch, err := loader.Load(filepath.Join(repoRoot, chartDir))
	if err != nil {
		return err
	}
	if app := ch.Metadata.AppVersion; app != imageTag {
		if _, err := node.Ctr(ctx, "images", "tag", "--force", imageRepo+":"+imageTag, imageRepo+":"+app); err != nil {
			return err
		}
	}
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
// helm CLI does (-f testdata/values.yaml --set ...), with the imported
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
