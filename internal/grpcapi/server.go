// Package grpcapi serves the agent over gRPC: the compute-blade-agent
// compatible BladeAgentService, kubeblade's own AgentService and the
// standard health service, on a unix socket and on TCP with mutual TLS.
package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/eventbus"
	"github.com/kubeblade/kubeblade/internal/grpcauth"
	"github.com/kubeblade/kubeblade/internal/hardware"
	"github.com/kubeblade/kubeblade/internal/version"
)

// Agent is what the services need from the agent; *agent.Agent has it.
type Agent interface {
	Status() agent.Status
	Subscribe(buffer int) *eventbus.Subscription[core.Event]
	Done() <-chan struct{}
	SetIdentify(ctx context.Context, on bool, src core.Source) error
	SetStealth(ctx context.Context, override *bool, src core.Source) error
	SetFanManual(ctx context.Context, percent int, src core.Source) error
	SetFanAuto(ctx context.Context, src core.Source) error
	SetLEDOverride(ctx context.Context, led hardware.LED, c *hardware.Color) error
	WaitForIdentifyConfirm(ctx context.Context) error
}

var _ Agent = (*agent.Agent)(nil)

// Options configure a Server.
type Options struct {
	Agent   Agent
	Version version.Info
	Logger  *slog.Logger
	// Audit gets one line per call that changes the blade and per refused
	// call (who, which RPC, arguments, result); default Logger with
	// log=audit. The agent gives it a logger that --log-level cannot mute.
	Audit *slog.Logger
	// WatchBuffer is how many events a slow watcher may fall behind
	// before it loses the oldest (it still gets the latest status).
	WatchBuffer int
}

// Server holds the services; Serve runs them on listeners.
type Server struct {
	o      Options
	health *health.Server
}

// New creates the services.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Audit == nil {
		o.Audit = o.Logger.With("log", "audit")
	}
	if o.Version.Version == "" {
		o.Version = version.Get()
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = 64
	}
	s := &Server{o: o, health: health.NewServer()}
	for _, name := range []string{"", bladeapiv1.BladeAgentService_ServiceDesc.ServiceName, agentv1.AgentService_ServiceDesc.ServiceName} {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	go func() {
		// A stopped agent cannot answer; load balancers and probes should
		// learn that from the health service, not from failed calls.
		<-o.Agent.Done()
		s.health.Shutdown()
	}()
	return s
}

// Serve serves on ln until ctx ends. tlsConfig must be set for anything
// but a unix socket: there is no plaintext TCP.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	var opts []grpc.ServerOption
	switch {
	case tlsConfig != nil:
		if tlsConfig.MinVersion < tls.VersionTLS13 {
			return errors.New("refusing to serve: TLS 1.3 is the minimum")
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	case ln.Addr().Network() == "unix":
		// The kernel's word on who connected, for the audit log.
		opts = append(opts, grpc.Creds(grpcauth.UnixCredentials()))
	default:
		return fmt.Errorf("refusing to serve gRPC on %s %s without mutual TLS", ln.Addr().Network(), ln.Addr())
	}
	// Every call is authorized first (roles from the client certificate),
	// then long calls (watches, identify waits) are tied to the server, so
	// a graceful stop does not wait for clients that never hang up.
	auth := &grpcauth.Authorizer{Policy: AccessPolicy, Audit: s.o.Audit}
	opts = append(opts,
		grpc.ChainUnaryInterceptor(auth.Unary, func(c context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			c, cancel := context.WithCancel(c)
			defer context.AfterFunc(ctx, cancel)()
			defer cancel()
			return h(c, req)
		}),
		grpc.ChainStreamInterceptor(auth.Stream, func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			c, cancel := context.WithCancel(ss.Context())
			defer context.AfterFunc(ctx, cancel)()
			defer cancel()
			return h(srv, &ctxStream{ServerStream: ss, ctx: c})
		}),
	)
	g := grpc.NewServer(opts...)
	bladeapiv1.RegisterBladeAgentServiceServer(g, &compatService{s: s})
	agentv1.RegisterAgentServiceServer(g, &agentService{s: s})
	healthpb.RegisterHealthServer(g, s.health)
	if missing := AccessPolicy.Missing(g.GetServiceInfo()); len(missing) > 0 {
		return fmt.Errorf("refusing to serve: no access rule for %v (add them to grpcapi.AccessPolicy)", missing)
	}

	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
	<-errc
	return nil
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// toStatus maps the agent's errors to gRPC codes callers can act on.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, core.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, core.ErrCriticalActive):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, agent.ErrNotRunning):
		return status.Error(codes.Unavailable, "the agent is not running (it is starting or shutting down)")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
