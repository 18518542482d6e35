// Package e2e drives kubeblade's real, built binaries through its user-facing
// flows on a local cluster (internal/localcluster): etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler processes, fake-kubelet blade
// Nodes, the kubeblade-operator process and one kubeblade-agent process per
// simulated blade. It runs with `make e2e`, which builds everything first;
// without KUBEBLADE_E2E=1 every flow skips (fails under make test's
// KUBEBLADE_TEST_REQUIRED=1: a suite of skipped flows tested nothing).
//
// The flows share one cluster and run as the subtests of TestFlows, in the
// order its list gives (go test -run 'TestFlows/OperatorUpgrade' picks
// one): each uses its own blade where they could interfere, and
// OperatorUpgrade, which replaces the operator, is last by that list, not
// by file names. TestFlowsAreListed keeps every flow in the list. Every
// wait polls the API (or a process) with a deadline; nothing sleeps to
// synchronise.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/localcluster"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
)

// Environment the package reads.
const (
	// EnvEnable must be 1 to run (make e2e sets it).
	EnvEnable = "KUBEBLADE_E2E"
	// EnvBin is the directory of the built binaries (default <repo>/bin).
	EnvBin = "KUBEBLADE_E2E_BIN"
	// EnvOperatorNext is the "upgraded" operator binary: the same code
	// stamped with another version (default <bin>/e2e/kubeblade-operator).
	EnvOperatorNext = "KUBEBLADE_E2E_OPERATOR_NEXT"
)

const bladeConfigName = "default"

var (
	cluster      *localcluster.Cluster
	operatorProc *localcluster.Process
	binDir       string
	operatorNext string
	// bladectlConfig names every blade's gRPC unix socket.
	bladectlConfig string
)

func TestMain(m *testing.M) {
	if os.Getenv(EnvEnable) != "1" {
		// Every flow ends in needCluster: a visible skip in a plain go
		// test, a failure under make test. The suite is make e2e's step,
		// not the unit step's.
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

// flows are the suite's tests in the order they run on the shared
// cluster. Add a new one here (TestFlowsAreListed fails otherwise), before
// OperatorUpgrade: it stops the operator the others rely on and leaves the
// upgraded one running.
var flows = []struct {
	name string
	run  func(*testing.T)
}{
	{"DaemonSetRolledOut", testDaemonSetRolledOut},
	{"BladectlGetBlades", testBladectlGetBlades},
	{"IdentifyByAnnotation", testIdentifyByAnnotation},
	{"ButtonPressedEvent", testButtonPressedEvent},
	{"OverheatCriticalAndRecovery", testOverheatCriticalAndRecovery},
	{"BladeConfigAppliedLive", testBladeConfigAppliedLive},
	{"AgentsConfinedToTheirNode", testAgentsConfinedToTheirNode},
	{"AdmissionPoliciesTypeCheck", testAdmissionPoliciesTypeCheck},
	{"FanPeersAcrossProcesses", testFanPeersAcrossProcesses},
	{"LongPressDrainsTheBlade", testLongPressDrainsTheBlade},
	{"OperatorUpgrade", testOperatorUpgrade},
}

// TestFlows runs every flow, in order; a failed one does not stop the
// next (each checks what it needs of the cluster).
func TestFlows(t *testing.T) {
	for _, f := range flows {
		t.Run(f.name, f.run)
	}
}

// needCluster ends a test that has no cluster: a visible skip in a plain
// go test, a failure under make test (KUBEBLADE_TEST_REQUIRED=1), whose e2e
// step must run every flow. A cluster that failed to start fails the
// package in TestMain instead.
func needCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		testreq.Unavailable(t, "no local cluster: the e2e suite runs with %s=1 (make e2e builds the binaries and sets it)", EnvEnable)
	}
}

func run(m *testing.M) int {
	binDir = os.Getenv(EnvBin)
	if binDir == "" {
		binDir = filepath.Join(testenv.RepoRoot(), "bin")
	}
	operatorNext = os.Getenv(EnvOperatorNext)
	if operatorNext == "" {
		operatorNext = filepath.Join(binDir, "e2e", "kubeblade-operator")
	}
	for _, b := range []string{"kubeblade-agent", "kubeblade-operator", "bladectl"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s missing in %s: run make e2e\n", b, binDir)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{BinDir: binDir, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the cluster:", err)
		return 1
	}
	code := 1
	defer func() {
		if code != 0 {
			fmt.Fprintln(os.Stderr, cluster.Logs(40))
		}
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the cluster:", err)
		}
	}()
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up:", err)
		return code
	}
	log.Info("e2e cluster ready", "took", time.Since(start).Round(100*time.Millisecond))
	code = m.Run()
	if code == 0 {
		// The agents act as their ServiceAccount (see localcluster): a
		// permission the installed RBAC or admission policy lacks shows up
		// as a refused request in an agent's log even when a flow still
		// passed, e.g. through a retry or another path.
		if refusals := agentRefusals(); len(refusals) > 0 {
			fmt.Fprintln(os.Stderr, "e2e: the API server refused agent requests:\n"+strings.Join(refusals, "\n"))
			code = 1
		}
	}
	return code
}

// agentRefusals returns the agents' log lines that report a request the API
// server refused (Forbidden, or denied by the admission policy).
func agentRefusals() []string {
	var out []string
	for _, n := range cluster.Nodes {
		a := cluster.Agent(n)
		if a == nil {
			continue
		}
		raw, err := os.ReadFile(a.Log)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: reading the agent log: %v", n, err))
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			l := strings.ToLower(line)
			if strings.Contains(l, "forbidden") || strings.Contains(l, "denied request") {
				out = append(out, n+": "+line)
			}
		}
	}
	return out
}

// setUp installs the BladeConfig, starts the operator and one agent per
// blade, and waits for the rollout.
func setUp(ctx context.Context) error {
	bc := &kbv1.BladeConfig{
		ObjectMeta: metav1.ObjectMeta{Name: bladeConfigName},
		Spec: kbv1.BladeConfigSpec{Agent: agentconfigv1.AgentConfig{
			FanCurve:          []agentconfigv1.FanCurveStep{{TemperatureCelsius: 45, Percent: 40}, {TemperatureCelsius: 55, Percent: 80}},
			CriticalCelsius:   60,
			HysteresisCelsius: 5,
			TaintOnCritical:   true,
		}},
	}
	localcluster.AgentStartSettings(&bc.Spec.Agent)
	if err := cluster.Ctrl.Create(ctx, bc); err != nil {
		return err
	}
	var err error
	if operatorProc, err = cluster.StartOperator(localcluster.OperatorOptions{}); err != nil {
		return err
	}
	for _, n := range cluster.Nodes {
		if _, err := cluster.StartAgent(ctx, n); err != nil {
			return err
		}
	}
	if _, err := cluster.WaitRolledOut(ctx, bladeConfigName, 3*time.Minute); err != nil {
		return err
	}
	bladectlConfig = filepath.Join(cluster.Dir, "bladectl.yaml")
	for _, n := range cluster.Nodes {
		if _, err := bladectl("config", "add", n, "--server", "unix://"+cluster.Agent(n).Socket); err != nil {
			return err
		}
	}
	return nil
}

// bladectl runs the built bladectl against the cluster and the blades'
// sockets and returns its combined output.
func bladectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "bladectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "BLADECTL_CONFIG="+bladectlConfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("bladectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
