// Package envtest_test proves the test harness: a real kube-apiserver and
// etcd, built from source by `make test`, accept and serve objects.
package envtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeblade/kubeblade/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e }))
}

func TestCreateAndReadNode(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   "blade-smoke",
		Labels: map[string]string{"kubernetes.io/arch": "arm64"},
	}}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a Node: %v", err)
	}
	if created.UID == "" {
		t.Fatal("the API server assigned no UID")
	}
	got, err := cs.CoreV1().Nodes().Get(ctx, "blade-smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.Labels["kubernetes.io/arch"] != "arm64" {
		t.Fatalf("read back %s %v, want %s with its label", got.UID, got.Labels, created.UID)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver %s", v.GitVersion)
}
