package bladectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
)

// bladeClient is what the commands need from one blade. The gRPC client
// talks to the blade's agent; the Kubernetes mode's nodeClient (--node,
// `kubectl blade`) writes Node annotations and reads Blade objects.
type bladeClient interface {
	Status(ctx context.Context) (*agentv1.Status, error)
	Watch(ctx context.Context, each func(*agentv1.WatchStatusResponse) error) error
	SetIdentify(ctx context.Context, on, wait bool) (*agentv1.Status, error)
	SetStealth(ctx context.Context, mode agentv1.StealthMode) (*agentv1.Status, error)
	// SetFan sets a manual percent, or the curve when percent is nil.
	SetFan(ctx context.Context, percent *uint32) (*agentv1.Status, error)
	// SetLEDColor fixes one LED's colour, or clears the override when
	// color is nil.
	SetLEDColor(ctx context.Context, led agentv1.LED, color *agentv1.Color) (*agentv1.Status, error)
	// Address names where the blade is reached, for error messages.
	Address() string
	Close() error
}

// connector opens a client for a named blade.
type connector interface {
	Connect(name string) (bladeClient, error)
}

// grpcConnector reaches agents listed in a bladectl config file.
type grpcConnector struct {
	cfg     *clientconfig.Config
	baseDir string
	// poll and clock pace monitor against old agents.
	poll  time.Duration
	clock clock.WithTicker
}

func (g grpcConnector) Connect(name string) (bladeClient, error) {
	b, ok := g.cfg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no blade named %q in the config (see `bladectl config list`)", name)
	}
	conn, err := b.Dial(g.baseDir)
	if err != nil {
		return nil, fmt.Errorf("blade %q in the config: %w", name, err)
	}
	return &grpcClient{conn: conn, c: agentv1.NewAgentServiceClient(conn), old: bladeapiv1.NewBladeAgentServiceClient(conn),
		addr: b.Server, poll: g.poll, clock: g.clock}, nil
}

func configBaseDir(path string) string { return filepath.Dir(path) }

// grpcClient speaks kubeblade's AgentService and, to an agent that does
// not serve it (compute-blade-agent), the old BladeAgentService: each call
// tries kubeblade's service until the agent says it does not know it, and
// the client remembers that for the rest of the run (legacy.go).
type grpcClient struct {
	conn  *grpc.ClientConn
	c     agentv1.AgentServiceClient
	old   bladeapiv1.BladeAgentServiceClient
	addr  string
	poll  time.Duration
	clock clock.WithTicker
	// legacy is set once the agent answered "unknown service".
	legacy atomic.Bool
}

func (g *grpcClient) Address() string { return g.addr }
func (g *grpcClient) Close() error    { return g.conn.Close() }

// LegacyAPI reports whether the agent turned out to serve only the old API.
func (g *grpcClient) LegacyAPI() bool { return g.legacy.Load() }

// useNew reports whether to try kubeblade's service; fellBack whether err
// says the agent lacks it (and remembers that).
func (g *grpcClient) useNew() bool { return !g.legacy.Load() }
func (g *grpcClient) fellBack(err error) bool {
	if isUnknownService(err) {
		g.legacy.Store(true)
		return true
	}
	return false
}

func (g *grpcClient) Status(ctx context.Context) (*agentv1.Status, error) {
	if g.useNew() {
		r, err := g.c.GetStatus(ctx, &agentv1.GetStatusRequest{})
		if !g.fellBack(err) {
			return r.GetStatus(), err
		}
	}
	return g.oldStatus(ctx)
}

func (g *grpcClient) Watch(ctx context.Context, each func(*agentv1.WatchStatusResponse) error) error {
	if !g.useNew() {
		return g.oldWatch(ctx, each)
	}
	s, err := g.c.WatchStatus(ctx, &agentv1.WatchStatusRequest{})
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the agent ended the watch")
		}
		// A server-streaming call learns of an unknown service only
		// from its first Recv.
		if g.fellBack(err) {
			return g.oldWatch(ctx, each)
		}
		if err != nil {
			return err
		}
		if err := each(m); err != nil {
			return err
		}
	}
}

func (g *grpcClient) SetIdentify(ctx context.Context, on, wait bool) (*agentv1.Status, error) {
	if g.useNew() {
		r, err := g.c.SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: on, WaitForConfirm: wait})
		if !g.fellBack(err) {
			return r.GetStatus(), err
		}
	}
	return g.oldSetIdentify(ctx, on, wait)
}

func (g *grpcClient) SetStealth(ctx context.Context, mode agentv1.StealthMode) (*agentv1.Status, error) {
	if g.useNew() {
		r, err := g.c.SetStealth(ctx, &agentv1.SetStealthRequest{Mode: mode})
		if !g.fellBack(err) {
			return r.GetStatus(), err
		}
	}
	return g.oldSetStealth(ctx, mode)
}

func (g *grpcClient) SetFan(ctx context.Context, percent *uint32) (*agentv1.Status, error) {
	if g.useNew() {
		req := &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Auto{Auto: true}}
		if percent != nil {
			req.Mode = &agentv1.SetFanRequest_Percent{Percent: *percent}
		}
		r, err := g.c.SetFan(ctx, req)
		if !g.fellBack(err) {
			return r.GetStatus(), err
		}
	}
	return g.oldSetFan(ctx, percent)
}

func (g *grpcClient) SetLEDColor(ctx context.Context, led agentv1.LED, color *agentv1.Color) (*agentv1.Status, error) {
	if g.useNew() {
		req := &agentv1.SetLEDColorRequest{Led: led, Action: &agentv1.SetLEDColorRequest_Clear{Clear: true}}
		if color != nil {
			req.Action = &agentv1.SetLEDColorRequest_Color{Color: color}
		}
		r, err := g.c.SetLEDColor(ctx, req)
		if !g.fellBack(err) {
			return r.GetStatus(), err
		}
	}
	return nil, unsupportedError{"LED colours"}
}
