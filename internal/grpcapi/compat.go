package grpcapi

import (
	"context"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// compatService is the compute-blade-agent's API. Its semantics follow the
// old agent where kubeblade can keep them; where it cannot (forcing
// critical mode) the call fails loudly instead of pretending.
type compatService struct {
	bladeapiv1.UnimplementedBladeAgentServiceServer
	s *Server
}

func (c *compatService) EmitEvent(ctx context.Context, req *bladeapiv1.EmitEventRequest) (*emptypb.Empty, error) {
	var err error
	switch ev := req.GetEvent(); ev {
	case bladeapiv1.Event_IDENTIFY:
		err = c.s.o.Agent.SetIdentify(ctx, true, core.SourceAPI)
	case bladeapiv1.Event_IDENTIFY_CONFIRM:
		err = c.s.o.Agent.SetIdentify(ctx, false, core.SourceAPI)
	case bladeapiv1.Event_CRITICAL, bladeapiv1.Event_CRITICAL_RESET:
		// The old agent let a client force critical mode (and reset it,
		// even while the SoC was hot). kubeblade derives critical mode from
		// the temperature alone, so a reset can never unprotect a hot blade.
		return nil, status.Errorf(codes.Unimplemented,
			"event %s is not supported: kubeblade enters and leaves critical mode from the SoC temperature only", ev)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown event %d", int32(ev))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &emptypb.Empty{}, nil
}

func (c *compatService) WaitForIdentifyConfirm(ctx context.Context, _ *emptypb.Empty) (*emptypb.Empty, error) {
	if err := c.s.o.Agent.WaitForIdentifyConfirm(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &emptypb.Empty{}, nil
}

func (c *compatService) SetFanSpeed(ctx context.Context, req *bladeapiv1.SetFanSpeedRequest) (*emptypb.Empty, error) {
	p := req.GetPercent()
	if p < 0 || p > 100 {
		return nil, status.Errorf(codes.InvalidArgument, "fan percent %d is outside 0–100", p)
	}
	if err := c.s.o.Agent.SetFanManual(ctx, int(p), core.SourceAPI); err != nil {
		return nil, toStatus(err)
	}
	return &emptypb.Empty{}, nil
}

func (c *compatService) SetFanSpeedAuto(ctx context.Context, _ *emptypb.Empty) (*emptypb.Empty, error) {
	if err := c.s.o.Agent.SetFanAuto(ctx, core.SourceAPI); err != nil {
		return nil, toStatus(err)
	}
	return &emptypb.Empty{}, nil
}

func (c *compatService) SetStealthMode(ctx context.Context, req *bladeapiv1.StealthModeRequest) (*emptypb.Empty, error) {
	on := req.GetEnable()
	if err := c.s.o.Agent.SetStealth(ctx, &on, core.SourceAPI); err != nil {
		return nil, toStatus(err)
	}
	return &emptypb.Empty{}, nil
}

func (c *compatService) GetStatus(context.Context, *emptypb.Empty) (*bladeapiv1.StatusResponse, error) {
	return compatStatus(c.s.o.Agent.Status(), c.s.o), nil
}

func compatStatus(st agent.Status, o Options) *bladeapiv1.StatusResponse {
	r := &bladeapiv1.StatusResponse{
		StealthMode:    st.Stealth,
		IdentifyActive: st.Identify,
		CriticalActive: st.Critical,
		PowerStatus:    bladeapiv1.PowerStatus_POE_OR_USBC,
		FanPercent:     uint32(st.FanPercent),
		// The old agent's "automatic" meant "no manual override"; critical
		// mode is automatic too.
		FanSpeedAutomatic:            !st.ManualFan,
		CriticalTemperatureThreshold: int64(math.Round(st.Settings.CriticalCelsius)),
		Version: &bladeapiv1.VersionInfo{
			Version: o.Version.Version,
			Commit:  o.Version.Commit,
		},
	}
	if st.TemperatureValid {
		r.Temperature = int64(math.Round(st.TemperatureCelsius))
	}
	if st.FanRPMValid {
		r.FanRpm = int64(math.Round(st.FanRPM))
	}
	if st.PowerSource == hardware.PowerPoEPlus {
		r.PowerStatus = bladeapiv1.PowerStatus_POE_802_AT
	}
	if !o.Version.Date.IsZero() {
		r.Version.Date = o.Version.Date.Unix()
	}
	for _, s := range st.Settings.Curve.Steps() {
		r.FanCurveSteps = append(r.FanCurveSteps, &bladeapiv1.FanCurveStep{
			Temperature: int64(math.Round(s.TemperatureCelsius)),
			Percent:     uint32(s.Percent),
		})
	}
	return r
}
