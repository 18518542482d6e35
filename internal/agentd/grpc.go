package agentd

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/grpcapi"
	"github.com/kubeblade/kubeblade/internal/pki"
	"github.com/kubeblade/kubeblade/internal/pki/standalone"
	"github.com/kubeblade/kubeblade/internal/unixsock"
	"github.com/kubeblade/kubeblade/internal/version"
)

// startGRPC opens the gRPC listeners: always the unix socket, and with
// remote access the mutual-TLS TCP port, whose certificates come from the
// standalone issuer in the state directory.
func startGRPC(o Options, d *Daemon, goServe func(string, func(context.Context) error)) error {
	srv := grpcapi.New(grpcapi.Options{Agent: d.Agent, Version: version.Get(), Logger: o.Logger})
	g := d.Config.GRPC
	ln, err := unixsock.Listen(g.SocketPath, 0o660)
	if err != nil {
		return fmt.Errorf("gRPC socket: %w", err)
	}
	d.GRPCSocket = g.SocketPath
	goServe("gRPC socket", func(ctx context.Context) error { return srv.Serve(ctx, ln, nil) })
	if !g.Remote.Enabled {
		return nil
	}
	if o.Kubernetes != nil {
		return startClusterTLS(o, d, srv, goServe)
	}

	// The seam for cluster-issued certificates: anything that is a
	// pki.CertificateSource can serve here.
	issuer, err := standalone.New(standalone.Options{
		Dir:        o.StateDir,
		ExtraSANs:  g.Remote.ExtraSANs,
		Port:       int(g.Remote.Port),
		ServerHost: dialHost(g.Remote.BindAddress),
		SocketPath: g.SocketPath,
		// A ready bladectl config for the local admin.
		ClientConfig: func(a standalone.Admin) ([]byte, error) {
			return clientconfig.ForAdmin(a.Host, a.ServerHost, a.Port, a.SocketPath, a.CAPEM, a.Client.CertPEM, a.Client.KeyPEM)
		},
		Clock:  o.Clock,
		Logger: o.Logger,
	})
	if err != nil {
		return fmt.Errorf("gRPC certificates: %w", err)
	}
	var src pki.CertificateSource = issuer
	tcp, err := listenRemote(o, d)
	if err != nil {
		return err
	}
	d.BladectlConfig = issuer.BladectlConfigPath()
	goServe("gRPC certificate renewal", issuer.Run)
	goServe("gRPC mTLS listener", func(ctx context.Context) error {
		return srv.Serve(ctx, tcp, pki.ServerTLSConfig(src))
	})
	o.Logger.Info("gRPC remote access enabled (mutual TLS)", "address", d.GRPCAddr, "bladectlConfig", d.BladectlConfig)
	return nil
}

// listenRemote binds the mutual-TLS TCP port on grpc.remote.bindAddress
// (every interface when empty; o.RemoteAddress overrides both) and records
// the bound address.
func listenRemote(o Options, d *Daemon) (net.Listener, error) {
	addr := o.RemoteAddress
	if addr == "" {
		r := d.Config.GRPC.Remote
		addr = net.JoinHostPort(r.BindAddress, strconv.Itoa(int(r.Port)))
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gRPC TCP listener: %w", err)
	}
	d.GRPCAddr = tcp.Addr().String()
	return tcp, nil
}

// dialHost is the host a client should dial for a listener bound to
// bindAddress: that address when it is a specific one, else "" (the
// hostname).
func dialHost(bindAddress string) string {
	if ip := net.ParseIP(bindAddress); ip != nil && !ip.IsUnspecified() {
		return bindAddress
	}
	return ""
}
