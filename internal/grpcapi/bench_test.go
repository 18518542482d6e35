package grpcapi_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
)

// BenchmarkRPCLatency measures one client's sequential call latency over
// each transport and reports the p50 and p99 alongside ns/op:
//
//	go test -run '^$' -bench RPCLatency -benchtime 5000x ./internal/grpcapi/
//
// GetStatus reads the agent's snapshot (transport cost); SetFan goes
// through the agent's loop (transport plus one loop round trip).
func BenchmarkRPCLatency(b *testing.B) {
	blade := grpcapitest.Start(b, grpcapitest.Options{TCP: true})
	ctx := context.Background()
	for _, tr := range []struct {
		name string
		cfg  clientconfig.Blade
	}{{"unix", blade.UnixBlade()}, {"mtls", blade.TLSBlade()}} {
		conn, err := tr.cfg.Dial("")
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		agent := agentv1.NewAgentServiceClient(conn)
		compat := bladeapiv1.NewBladeAgentServiceClient(conn)
		auto := &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Auto{Auto: true}}
		calls := map[string]func() error{
			"GetStatus": func() error {
				_, err := agent.GetStatus(ctx, &agentv1.GetStatusRequest{})
				return err
			},
			"CompatGetStatus": func() error {
				_, err := compat.GetStatus(ctx, &emptypb.Empty{})
				return err
			},
			"SetFan": func() error {
				_, err := agent.SetFan(ctx, auto)
				return err
			},
		}
		for _, name := range []string{"GetStatus", "CompatGetStatus", "SetFan"} {
			call := calls[name]
			b.Run(tr.name+"/"+name, func(b *testing.B) { measure(b, conn, call) })
		}
	}
}

func measure(b *testing.B, conn *grpc.ClientConn, call func() error) {
	// Connect (and for mTLS, handshake) outside the measurement.
	if err := call(); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
