package bladectl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/hardware"
)

// The old agent's API: compute-blade-agent serves only BladeAgentService
// (api/bladeapi), which kubeblade's agent serves too. bladectl speaks
// kubeblade's own AgentService and falls back to BladeAgentService, per
// blade, when an agent answers that it does not know that service. What
// the old API cannot express (LED colours, capabilities and hardware
// facts, a streaming watch, returning stealth to the configured mode) is
// said once per run, and a request for it fails with ExitUnsupported.

// apiLegacy marks results from an agent that serves only the old API.
const apiLegacy = "compute-blade-agent"

// DefaultPollInterval is how often monitor asks an old agent for its
// status. The old agent samples the temperature for its fan every 5 s
// (internal/agent/agent.go runFanController) and reads everything else
// when asked, so 2 s shows changes promptly without loading a Pi.
const DefaultPollInterval = 2 * time.Second

// settleTimeout bounds how long a control command waits for the old
// agent to apply an event: its EmitEvent only queues the event.
const settleTimeout = time.Second

// unsupportedError is a request the old API cannot carry.
type unsupportedError struct{ what string }

func (e unsupportedError) Error() string {
	return e.what + ": this agent serves only compute-blade-agent's API, which cannot do that (install kubeblade there)"
}

// bladectlRefusal is a request bladectl itself declines to send, so that
// what the user reads does not blame the agent for it.
type bladectlRefusal struct{ why string }

func (e bladectlRefusal) Error() string { return e.why }

// legacyReporter is implemented by clients that may fall back.
type legacyReporter interface{ LegacyAPI() bool }

// isUnknownService tells the old agent's answer to a kubeblade call:
// grpc-go answers a service it has no registration for with Unimplemented
// "unknown service <name>" (a method it lacks is "unknown method").
func isUnknownService(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unimplemented &&
		strings.HasPrefix(s.Message(), "unknown service "+agentv1.AgentService_ServiceDesc.ServiceName)
}

// isUnknownMethod tells a method the agent's (older) API lacks.
func isUnknownMethod(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unimplemented && strings.HasPrefix(s.Message(), "unknown method ")
}

// statusFromOld fills kubeblade's status with what the old API reports;
// the rest (LEDs, hardware, capabilities, hysteresis) stays unset.
func statusFromOld(r *bladeapiv1.StatusResponse, now time.Time) *agentv1.Status {
	temp := float64(r.GetTemperature())
	rpm := float64(r.GetFanRpm())
	st := &agentv1.Status{
		Running:            true,
		TemperatureCelsius: &temp,
		FanRpm:             &rpm,
		FanPercent:         r.GetFanPercent(),
		FanMode:            agentv1.FanMode_FAN_MODE_AUTO,
		Critical:           r.GetCriticalActive(),
		Identify:           r.GetIdentifyActive(),
		Stealth:            r.GetStealthMode(),
		StealthRequested:   r.GetStealthMode(),
		PowerSource:        string(hardware.PowerPoEOrUSBC),
		CriticalCelsius:    float64(r.GetCriticalTemperatureThreshold()),
		UpdatedAt:          timestamppb.New(now),
	}
	// uptime-industries/compute-blade-agent (485f5ac), the predecessor,
	// reports fields 1–6 only: no fan percent, mode, curve or version. Its
	// zero values are "unknown" here, not "manual at 0 %".
	older := r.GetVersion() == nil && len(r.GetFanCurveSteps()) == 0
	switch {
	case r.GetCriticalActive():
		st.FanMode = agentv1.FanMode_FAN_MODE_CRITICAL
	case older:
		st.FanMode = agentv1.FanMode_FAN_MODE_UNSPECIFIED
	case !r.GetFanSpeedAutomatic():
		st.FanMode = agentv1.FanMode_FAN_MODE_MANUAL
		p := r.GetFanPercent()
		st.ManualFanPercent = &p
	}
	if r.GetPowerStatus() == bladeapiv1.PowerStatus_POE_802_AT {
		st.PowerSource = string(hardware.PowerPoEPlus)
	}
	if v := r.GetVersion(); v != nil {
		st.Version = &agentv1.VersionInfo{Version: v.GetVersion(), Commit: v.GetCommit()}
		if v.GetDate() > 0 {
			st.Version.BuildTime = timestamppb.New(time.Unix(v.GetDate(), 0))
		}
	}
	for _, s := range r.GetFanCurveSteps() {
		st.FanCurve = append(st.FanCurve, &agentv1.FanCurveStep{TemperatureCelsius: float64(s.GetTemperature()), Percent: s.GetPercent()})
	}
	return st
}

func (g *grpcClient) oldStatus(ctx context.Context) (*agentv1.Status, error) {
	r, err := g.old.GetStatus(ctx, &emptypb.Empty{})
	if err != nil {
		return nil, err
	}
	return statusFromOld(r, g.clock.Now()), nil
}

// oldSettledStatus reads the status until done accepts it or
// settleTimeout passes: the old agent applies EmitEvent asynchronously.
// It returns the last status read either way.
func (g *grpcClient) oldSettledStatus(ctx context.Context, done func(*agentv1.Status) bool) (*agentv1.Status, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		st, err := g.oldStatus(ctx)
		if err != nil || done(st) || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// oldWatch polls the old agent's status and reports changes as the
// events a kubeblade agent would send.
func (g *grpcClient) oldWatch(ctx context.Context, each func(*agentv1.WatchStatusResponse) error) error {
	tick := g.clock.NewTicker(g.poll)
	defer tick.Stop()
	var prev *agentv1.Status
	for {
		st, err := g.oldStatus(ctx)
		if err != nil {
			return err
		}
		var msgs []*agentv1.WatchStatusResponse
		if prev == nil {
			msgs = append(msgs, &agentv1.WatchStatusResponse{Status: st})
		} else {
			for _, ev := range changes(prev, st) {
				msgs = append(msgs, &agentv1.WatchStatusResponse{Status: st, Event: ev})
			}
			if len(msgs) == 0 && readingsChanged(prev, st) {
				msgs = append(msgs, &agentv1.WatchStatusResponse{Status: st})
			}
		}
		for _, m := range msgs {
			if err := each(m); err != nil {
				return err
			}
		}
		prev = st
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C():
		}
	}
}

// changes names what differs between two polled statuses with the
// reasons kubeblade's agent uses for the same changes.
func changes(prev, cur *agentv1.Status) []*agentv1.Event {
	at := cur.GetUpdatedAt()
	var out []*agentv1.Event
	add := func(r core.Reason, warning bool, format string, args ...any) {
		out = append(out, &agentv1.Event{Reason: string(r), Message: fmt.Sprintf(format, args...), Warning: warning, Time: at})
	}
	if prev.Critical != cur.Critical {
		if cur.Critical {
			add(core.ReasonCriticalTemperature, true, "critical mode on (%.0f°C)", cur.GetTemperatureCelsius())
		} else {
			add(core.ReasonTemperatureNormal, false, "critical mode off (%.0f°C)", cur.GetTemperatureCelsius())
		}
	}
	if prev.Identify != cur.Identify {
		if cur.Identify {
			add(core.ReasonIdentifyStarted, false, "identify started")
		} else {
			add(core.ReasonIdentifyStopped, false, "identify stopped")
		}
	}
	if prev.Stealth != cur.Stealth {
		if cur.Stealth {
			add(core.ReasonStealthEnabled, false, "stealth on")
		} else {
			add(core.ReasonStealthDisabled, false, "stealth off")
		}
	}
	if prev.FanMode != cur.FanMode && !(prev.Critical != cur.Critical) {
		add(core.ReasonFanModeChanged, false, "fan %s", enumName(cur.FanMode.String(), "FAN_MODE_"))
	}
	if prev.PowerSource != cur.PowerSource {
		add(core.ReasonPowerSourceChanged, false, "power source %s", cur.PowerSource)
	}
	return out
}

func readingsChanged(prev, cur *agentv1.Status) bool {
	return prev.GetTemperatureCelsius() != cur.GetTemperatureCelsius() || prev.GetFanRpm() != cur.GetFanRpm() ||
		prev.FanPercent != cur.FanPercent
}

func (g *grpcClient) oldSetIdentify(ctx context.Context, on, wait bool) (*agentv1.Status, error) {
	ev := bladeapiv1.Event_IDENTIFY_CONFIRM
	if on {
		ev = bladeapiv1.Event_IDENTIFY
	}
	if _, err := g.old.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: ev}); err != nil {
		return nil, err
	}
	if on && wait {
		// The old agent releases this on the next confirmation (a button
		// press or another client's IDENTIFY_CONFIRM).
		if _, err := g.old.WaitForIdentifyConfirm(ctx, &emptypb.Empty{}); err != nil {
			return nil, err
		}
	}
	want := on && !wait
	return g.oldSettledStatus(ctx, func(st *agentv1.Status) bool { return st.Identify == want })
}

func (g *grpcClient) oldSetStealth(ctx context.Context, mode agentv1.StealthMode) (*agentv1.Status, error) {
	if mode != agentv1.StealthMode_STEALTH_MODE_ON && mode != agentv1.StealthMode_STEALTH_MODE_OFF {
		return nil, unsupportedError{"stealth clear (back to the configured mode)"}
	}
	on := mode == agentv1.StealthMode_STEALTH_MODE_ON
	if _, err := g.old.SetStealthMode(ctx, &bladeapiv1.StealthModeRequest{Enable: on}); err != nil {
		return nil, err
	}
	return g.oldStatus(ctx)
}

func (g *grpcClient) oldSetFan(ctx context.Context, percent *uint32) (*agentv1.Status, error) {
	if percent == nil {
		// The old agent's SetFanSpeedAuto drops the 100 % that critical
		// mode set, on a blade that is still too hot; kubeblade's agent
		// keeps it. Refuse instead of sending it.
		st, err := g.oldStatus(ctx)
		if err != nil {
			return nil, err
		}
		if st.Critical {
			return st, bladectlRefusal{"fan auto not sent: the blade is in critical mode, and the old agent would let its fan leave 100 % while it is still hot (kubeblade's agent keeps it); bladectl refuses it"}
		}
		if _, err := g.old.SetFanSpeedAuto(ctx, &emptypb.Empty{}); err != nil {
			if isUnknownMethod(err) {
				return nil, unsupportedError{"fan auto (this agent predates SetFanSpeedAuto)"}
			}
			return nil, err
		}
		return g.oldStatus(ctx)
	}
	if _, err := g.old.SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: int64(*percent)}); err != nil {
		return nil, err
	}
	return g.oldStatus(ctx)
}
