package bladectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"google.golang.org/grpc"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
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
	return &grpcClient{conn: conn, c: agentv1.NewAgentServiceClient(conn), addr: b.Server}, nil
}

func configBaseDir(path string) string { return filepath.Dir(path) }

type grpcClient struct {
	conn *grpc.ClientConn
	c    agentv1.AgentServiceClient
	addr string
}

func (g *grpcClient) Address() string { return g.addr }
func (g *grpcClient) Close() error    { return g.conn.Close() }

func (g *grpcClient) Status(ctx context.Context) (*agentv1.Status, error) {
	r, err := g.c.GetStatus(ctx, &agentv1.GetStatusRequest{})
	return r.GetStatus(), err
}

func (g *grpcClient) Watch(ctx context.Context, each func(*agentv1.WatchStatusResponse) error) error {
	s, err := g.c.WatchStatus(ctx, &agentv1.WatchStatusRequest{})
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the agent ended the watch")
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
	r, err := g.c.SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: on, WaitForConfirm: wait})
	return r.GetStatus(), err
}

func (g *grpcClient) SetStealth(ctx context.Context, mode agentv1.StealthMode) (*agentv1.Status, error) {
	r, err := g.c.SetStealth(ctx, &agentv1.SetStealthRequest{Mode: mode})
	return r.GetStatus(), err
}

func (g *grpcClient) SetFan(ctx context.Context, percent *uint32) (*agentv1.Status, error) {
	req := &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Auto{Auto: true}}
	if percent != nil {
		req.Mode = &agentv1.SetFanRequest_Percent{Percent: *percent}
	}
	r, err := g.c.SetFan(ctx, req)
	return r.GetStatus(), err
}

func (g *grpcClient) SetLEDColor(ctx context.Context, led agentv1.LED, color *agentv1.Color) (*agentv1.Status, error) {
	req := &agentv1.SetLEDColorRequest{Led: led, Action: &agentv1.SetLEDColorRequest_Clear{Clear: true}}
	if color != nil {
		req.Action = &agentv1.SetLEDColorRequest_Color{Color: color}
	}
	r, err := g.c.SetLEDColor(ctx, req)
	return r.GetStatus(), err
}
