package grpcapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agent"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// agentService is kubeblade's own API.
type agentService struct {
	agentv1.UnimplementedAgentServiceServer
	s *Server
}

func (a *agentService) status() *agentv1.Status {
	return toProtoStatus(a.s.o.Agent.Status(), a.s.o)
}

func (a *agentService) GetStatus(context.Context, *agentv1.GetStatusRequest) (*agentv1.GetStatusResponse, error) {
	return &agentv1.GetStatusResponse{Status: a.status()}, nil
}

func (a *agentService) WatchStatus(_ *agentv1.WatchStatusRequest, stream grpc.ServerStreamingServer[agentv1.WatchStatusResponse]) error {
	ctx := stream.Context()
	// Subscribe before the first snapshot so no change falls between them.
	sub := a.s.o.Agent.Subscribe(a.s.o.WatchBuffer)
	defer sub.Close()
	last := a.status()
	if err := stream.Send(&agentv1.WatchStatusResponse{Status: last}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			// The caller's deadline or cancellation, as its status code: a
			// nil return would reach the client as a clean end of stream
			// (io.EOF), indistinguishable from the agent ending the watch,
			// and the server's copy of the deadline can fire a little
			// before the client's own.
			return status.FromContextError(ctx.Err()).Err()
		case <-a.s.o.Agent.Done():
			return status.Error(codes.Unavailable, "the agent stopped")
		case ev, ok := <-sub.C():
			if !ok {
				return status.Error(codes.Unavailable, "the agent stopped")
			}
			st := a.status()
			msg := &agentv1.WatchStatusResponse{Status: st}
			if ev.Reason != core.ReasonStatusChanged {
				msg.Event = toProtoEvent(ev)
			} else if proto.Equal(st, last) {
				// The status this announces was already sent with the
				// event that caused it.
				continue
			}
			last = st
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
	}
}

func (a *agentService) SetIdentify(ctx context.Context, req *agentv1.SetIdentifyRequest) (*agentv1.SetIdentifyResponse, error) {
	if err := a.s.o.Agent.SetIdentify(ctx, req.GetOn(), core.SourceAPI); err != nil {
		return nil, toStatus(err)
	}
	if req.GetOn() && req.GetWaitForConfirm() {
		if err := a.s.o.Agent.WaitForIdentifyConfirm(ctx); err != nil {
			return nil, toStatus(err)
		}
	}
	return &agentv1.SetIdentifyResponse{Status: a.status()}, nil
}

func (a *agentService) SetStealth(ctx context.Context, req *agentv1.SetStealthRequest) (*agentv1.SetStealthResponse, error) {
	var override *bool
	switch m := req.GetMode(); m {
	case agentv1.StealthMode_STEALTH_MODE_ON, agentv1.StealthMode_STEALTH_MODE_OFF:
		on := m == agentv1.StealthMode_STEALTH_MODE_ON
		override = &on
	case agentv1.StealthMode_STEALTH_MODE_CONFIGURED:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "stealth mode %s: want ON, OFF or CONFIGURED", m)
	}
	if err := a.s.o.Agent.SetStealth(ctx, override, core.SourceAPI); err != nil {
		return nil, toStatus(err)
	}
	return &agentv1.SetStealthResponse{Status: a.status()}, nil
}

func (a *agentService) SetFan(ctx context.Context, req *agentv1.SetFanRequest) (*agentv1.SetFanResponse, error) {
	var err error
	switch m := req.GetMode().(type) {
	case *agentv1.SetFanRequest_Percent:
		if m.Percent > 100 {
			return nil, status.Errorf(codes.InvalidArgument, "fan percent %d is outside 0–100", m.Percent)
		}
		err = a.s.o.Agent.SetFanManual(ctx, int(m.Percent), core.SourceAPI)
	case *agentv1.SetFanRequest_Auto:
		if !m.Auto {
			return nil, status.Error(codes.InvalidArgument, "auto must be true (set percent for a manual duty)")
		}
		err = a.s.o.Agent.SetFanAuto(ctx, core.SourceAPI)
	default:
		return nil, status.Error(codes.InvalidArgument, "set either percent or auto")
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &agentv1.SetFanResponse{Status: a.status()}, nil
}

func (a *agentService) SetLEDColor(ctx context.Context, req *agentv1.SetLEDColorRequest) (*agentv1.SetLEDColorResponse, error) {
	var led hardware.LED
	switch req.GetLed() {
	case agentv1.LED_LED_TOP:
		led = hardware.LEDTop
	case agentv1.LED_LED_EDGE:
		led = hardware.LEDEdge
	default:
		return nil, status.Errorf(codes.InvalidArgument, "LED %s: want LED_TOP or LED_EDGE", req.GetLed())
	}
	var c *hardware.Color
	switch act := req.GetAction().(type) {
	case *agentv1.SetLEDColorRequest_Color:
		col, err := fromProtoColor(act.Color)
		if err != nil {
			return nil, err
		}
		c = &col
	case *agentv1.SetLEDColorRequest_Clear:
		if !act.Clear {
			return nil, status.Error(codes.InvalidArgument, "clear must be true (set color to fix a colour)")
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "set either color or clear")
	}
	if err := a.s.o.Agent.SetLEDOverride(ctx, led, c); err != nil {
		return nil, toStatus(err)
	}
	return &agentv1.SetLEDColorResponse{Status: a.status()}, nil
}

func fromProtoColor(c *agentv1.Color) (hardware.Color, error) {
	if c == nil {
		return hardware.Color{}, status.Error(codes.InvalidArgument, "no colour given")
	}
	if c.GetRed() > 255 || c.GetGreen() > 255 || c.GetBlue() > 255 {
		return hardware.Color{}, status.Errorf(codes.InvalidArgument,
			"colour (%d, %d, %d): each component must be 0–255", c.GetRed(), c.GetGreen(), c.GetBlue())
	}
	return hardware.Color{R: uint8(c.GetRed()), G: uint8(c.GetGreen()), B: uint8(c.GetBlue())}, nil
}

func toProtoColor(c hardware.Color) *agentv1.Color {
	return &agentv1.Color{Red: uint32(c.R), Green: uint32(c.G), Blue: uint32(c.B)}
}

func toProtoEvent(ev core.Event) *agentv1.Event {
	e := &agentv1.Event{Reason: string(ev.Reason), Message: ev.Message, Warning: ev.Warning, Source: string(ev.Source)}
	if !ev.Time.IsZero() {
		e.Time = timestamppb.New(ev.Time)
	}
	return e
}

var (
	fanModes = map[core.FanMode]agentv1.FanMode{
		core.FanModeAuto:     agentv1.FanMode_FAN_MODE_AUTO,
		core.FanModeManual:   agentv1.FanMode_FAN_MODE_MANUAL,
		core.FanModeCritical: agentv1.FanMode_FAN_MODE_CRITICAL,
	}
	patterns = map[core.Pattern]agentv1.LEDPattern{
		core.PatternOff:    agentv1.LEDPattern_LED_PATTERN_OFF,
		core.PatternSteady: agentv1.LEDPattern_LED_PATTERN_STEADY,
		core.PatternBlink:  agentv1.LEDPattern_LED_PATTERN_BLINK,
	}
	protoLEDs = map[hardware.LED]agentv1.LED{hardware.LEDTop: agentv1.LED_LED_TOP, hardware.LEDEdge: agentv1.LED_LED_EDGE}
)

func toProtoStatus(st agent.Status, o Options) *agentv1.Status {
	p := &agentv1.Status{
		Running:           st.Running,
		FanPercent:        uint32(st.FanPercent),
		FanMode:           fanModes[st.FanMode],
		FanStalled:        st.FanStalled,
		Critical:          st.Critical,
		Identify:          st.Identify,
		Stealth:           st.Stealth,
		StealthRequested:  st.StealthRequested,
		StealthOverride:   st.StealthOverride,
		PowerSource:       string(st.PowerSource),
		ConfigName:        st.ConfigName,
		CriticalCelsius:   st.Settings.CriticalCelsius,
		HysteresisCelsius: st.Settings.HysteresisCelsius,
		Hardware: &agentv1.HardwareInfo{
			Backend:             st.Info.Backend,
			IsBlade:             st.Info.IsBlade,
			Soc:                 st.Info.SoC,
			FanUnit:             string(st.Info.FanUnit),
			Detail:              st.Info.Detail,
			Capabilities:        st.Capabilities.List(),
			MissingCapabilities: st.Capabilities.Missing(),
		},
		Version: &agentv1.VersionInfo{Version: o.Version.Version, Commit: o.Version.Commit},
	}
	if st.TemperatureValid {
		p.TemperatureCelsius = proto.Float64(st.TemperatureCelsius)
	}
	if st.AirflowValid {
		p.AirflowCelsius = proto.Float64(st.AirflowCelsius)
	}
	if st.FanRPMValid {
		p.FanRpm = proto.Float64(st.FanRPM)
	}
	if st.ManualFan {
		p.ManualFanPercent = proto.Uint32(uint32(st.ManualFanPercent))
	}
	if !o.Version.Date.IsZero() {
		p.Version.BuildTime = timestamppb.New(o.Version.Date)
	}
	if !st.UpdatedAt.IsZero() {
		p.UpdatedAt = timestamppb.New(st.UpdatedAt)
	}
	for _, led := range hardware.LEDs {
		ls := &agentv1.LEDStatus{
			Led:     protoLEDs[led],
			Pattern: patterns[st.LEDs[led].Pattern],
			Color:   toProtoColor(st.LEDs[led].Color),
		}
		if c := st.LEDOverride[led]; c != nil {
			ls.Override = toProtoColor(*c)
		}
		p.Leds = append(p.Leds, ls)
	}
	for _, s := range st.Settings.Curve.Steps() {
		p.FanCurve = append(p.FanCurve, &agentv1.FanCurveStep{TemperatureCelsius: s.TemperatureCelsius, Percent: uint32(s.Percent)})
	}
	return p
}
