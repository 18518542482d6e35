package agentd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// TestRemoteBindAddress: grpc.remote.bindAddress binds the mutual-TLS
// listener to that address only, and the bladectl config the agent writes
// dials it there.
func TestRemoteBindAddress(t *testing.T) {
	// A port that was free a moment ago (the config takes no port 0).
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	body := fmt.Sprintf("hardware:\n  backend: simulated\nmetrics:\n  bindAddress: \"0\"\ngrpc:\n  socketPath: %s\n  remote:\n    enabled: true\n    bindAddress: 127.0.0.1\n    port: %d\n",
		filepath.Join(dir, "agent.sock"), port)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	started := make(chan *Daemon, 1)
	go func() {
		errc <- Run(ctx, Options{ConfigPath: cfg, StateDir: filepath.Join(dir, "state"), Started: func(d *Daemon) { started <- d }})
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
	want := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if d.GRPCAddr != want {
		t.Fatalf("bound %s, want %s", d.GRPCAddr, want)
	}
	bc, _, err := clientconfig.Load(d.BladectlConfig)
	if err != nil {
		t.Fatal(err)
	}
	remote, _ := bc.Lookup(bc.CurrentBlade)
	if remote.Server != want {
		t.Errorf("bladectl config dials %s, want %s", remote.Server, want)
	}
	conn, err := remote.Dial("")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	if _, err := agentv1.NewAgentServiceClient(conn).GetStatus(c, &agentv1.GetStatusRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Errorf("GetStatus with the written config as it is: %v", err)
	}
	// Another address of this machine does not answer on the port.
	if ip := otherLocalIPv4(); ip != nil {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the listener answers on %s too", ip)
		}
	} else {
		t.Log("no non-loopback IPv4 address here to check the listener does not answer on")
	}
}

func otherLocalIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP
		}
	}
	return nil
}
