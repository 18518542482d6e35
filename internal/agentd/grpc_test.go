package agentd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
)

func TestDaemonServesGRPCOnSocketAndMutualTLS(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	body := "hardware:\n  backend: simulated\nmetrics:\n  bindAddress: \"0\"\ngrpc:\n  socketPath: " + filepath.Join(dir, "agent.sock") +
		"\n  remote:\n    enabled: true\n    extraSANs: [blade.example.org]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	started := make(chan *Daemon, 1)
	go func() {
		errc <- Run(ctx, Options{ConfigPath: cfg, StateDir: filepath.Join(dir, "state"), RemoteAddress: "127.0.0.1:0",
			Started: func(d *Daemon) { started <- d }})
	}()
	var d *Daemon
	select {
	case d = <-started:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start")
	}
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if d.GRPCSocket == "" || d.GRPCAddr == "" || d.BladectlConfig != filepath.Join(dir, "state", "bladectl.yaml") {
		t.Fatalf("daemon endpoints: %+v", d)
	}

	// The bladectl config the agent wrote names the blade by hostname; use
	// its credentials against the bound address.
	bc, _, err := clientconfig.Load(d.BladectlConfig)
	if err != nil {
		t.Fatal(err)
	}
	remote, _ := bc.Lookup(bc.CurrentBlade)
	remote.Server = d.GRPCAddr
	remote.TLSServerName = "blade.example.org"
	for name, b := range map[string]clientconfig.Blade{"socket": {Server: "unix://" + d.GRPCSocket}, "mtls": remote} {
		conn, err := b.Dial("")
		if err != nil {
			t.Fatal(err)
		}
		c, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := agentv1.NewAgentServiceClient(conn).GetStatus(c, &agentv1.GetStatusRequest{}, grpc.WaitForReady(true))
		ccancel()
		conn.Close()
		if err != nil || res.Status.Hardware.GetBackend() != "simulated" {
			t.Errorf("%s: GetStatus = %v, %v", name, res, err)
		}
	}
}
