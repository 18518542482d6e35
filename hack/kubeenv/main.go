// Command kubeenv runs a local kube-apiserver and etcd (the binaries
// hack/k8s-tools.sh builds) with kubeblade's CRDs installed and a few Nodes
// created, writes an admin kubeconfig, and runs until interrupted. The
// footprint harness and the demo use it; nothing here is for production.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeenv:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("write-kubeconfig", "", "where to write the admin kubeconfig (required)")
	nodes := flag.String("nodes", "", "comma-separated Node names to create (arm64)")
	flag.Parse()
	if *kubeconfig == "" {
		return fmt.Errorf("--write-kubeconfig is required")
	}
	env, err := testenv.Start(testenv.Options{CRDDirs: []string{"config/crd/bases"}})
	if err != nil {
		return err
	}
	defer env.Stop()
	user, err := env.Environment().AddUser(envtest.User{Name: "kubeblade-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*kubeconfig, kc, 0o600); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	for _, n := range strings.Split(*nodes, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
			"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": n,
		}}}
		if _, err := cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n, err)
		}
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
