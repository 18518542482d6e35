package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// agentBinary is RELIABILITY_AGENT (make reliability passes bin/kubeblade-agent)
// or a fresh build of cmd/kubeblade-agent.
func agentBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RELIABILITY_AGENT"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "kubeblade-agent")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/kubeblade-agent")
	cmd.Dir = testenv.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, b)
	}
	return out
}

// agentProcess is kubeblade-agent running as its own process on the
// simulated backend in Kubernetes mode.
type agentProcess struct {
	cmd    *exec.Cmd
	socket string
	log    string
}

func startAgentProcess(t *testing.T, bin, dir, kubeconfig, node string) *agentProcess {
	t.Helper()
	cfg := filepath.Join(dir, "agent.yaml")
	sock := filepath.Join(dir, "agent.sock")
	yaml := fmt.Sprintf("hardware:\n  backend: simulated\ngrpc:\n  socketPath: %s\nmetrics:\n  bindAddress: 127.0.0.1:0\n", sock)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("agent-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--kubernetes", "--kubeconfig", kubeconfig, "--node-name", node,
		"--config", cfg, "--state-dir", filepath.Join(dir, "state"), "--log-level", "info")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProcess{cmd: cmd, socket: sock, log: logPath}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("agent log:\n%s", b)
		}
	})
	return p
}

// status asks the agent over its unix socket (the old agent's API).
func (p *agentProcess) status() (*bladeapiv1.StatusResponse, error) {
	conn, err := clientconfig.Blade{Server: "unix://" + p.socket}.Dial("")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return bladeapiv1.NewBladeAgentServiceClient(conn).GetStatus(ctx, &emptypb.Empty{})
}

// TestKillAgentMidIdentify kill -9s an agent process while the Node's
// identify annotation has it blinking, starts it again and expects identify
// restored from the annotation, and reports how long that took (make
// reliability's summary): a bound on that wall time would measure the
// machine's load, two processes and an API server apart. The simulated
// hardware dies with the process, so the restarted agent's own status is
// what is checked.
func TestKillAgentMidIdentify(t *testing.T) {
	needCP(t)
	summary.fault(t, "agent kill -9 mid-identify")
	bin := agentBinary(t)
	node := "rel-kill"
	startBlade(t, node, nil).stop() // creates the Node; this in-process agent is gone again
	dir := t.TempDir()
	kc := cp.kubeconfig(t)

	p := startAgentProcess(t, bin, dir, kc, node)
	testwait.Eventually(t, 30*time.Second, "agent process serving", func(context.Context) (bool, string) {
		_, err := p.status()
		return err == nil, fmt.Sprint(err)
	})
	annotate(t, node, map[string]any{kbv1.AnnotationIdentify: "true"})
	testwait.Eventually(t, 10*time.Second, "identify on", func(context.Context) (bool, string) {
		st, err := p.status()
		return err == nil && st.IdentifyActive, fmt.Sprint(st, err)
	})

	if err := p.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	// The killed process left its sockets behind; the new one must cope.
	restart := time.Now()
	p2 := startAgentProcess(t, bin, dir, kc, node)
	var serving time.Duration
	testwait.Eventually(t, 30*time.Second, "identify restored after kill -9", func(context.Context) (bool, string) {
		st, err := p2.status()
		if err == nil && serving == 0 {
			serving = time.Since(restart)
		}
		return err == nil && st.IdentifyActive, fmt.Sprint(st, err)
	})
	restored := time.Since(restart)
	summary.note("agent kill -9 mid-identify: new process serving after %s, identify restored from the annotation %s after its start",
		serving.Round(time.Millisecond), restored.Round(time.Millisecond))
	n, err := (&blade{node: node}).getNode()
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations[kbv1.AnnotationIdentify] != "true" {
		summary.lose(t, "identify annotation gone after the restart: %v", n.Annotations)
	}
	testwait.Eventually(t, 30*time.Second, "Blade status from the new process", func(context.Context) (bool, string) {
		bl, err := (&blade{node: node}).getBlade()
		return err == nil && bl.Status.Identify && bl.Status.State == kbv1.BladeStateIdentify, fmt.Sprint(err)
	})
}
