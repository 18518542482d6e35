package oldagenttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

func dialSocket(t *testing.T, a *Agent) bladeapiv1.BladeAgentServiceClient {
	t.Helper()
	c, closeConn, err := Dial("unix://"+a.Socket, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeConn() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// The quirks the compatibility tests rely on, as the old agent's source
// has them (see the package comment).

func TestOldAgentServesNoKubebladeService(t *testing.T) {
	a := Start(t, Options{})
	conn, err := grpc.NewClient("unix://"+a.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = agentv1.NewAgentServiceClient(conn).GetStatus(ctx(t), &agentv1.GetStatusRequest{})
	if s, _ := status.FromError(err); s.Code() != codes.Unimplemented || s.Message() != "unknown service kubeblade.agent.v1alpha1.AgentService" {
		t.Fatalf("kubeblade's GetStatus: %v", err)
	}
}

func TestOldAgentWaitForIdentifyConfirmWaitsForTheNextConfirmation(t *testing.T) {
	a := Start(t, Options{})
	c := dialSocket(t, a)
	done := make(chan error, 1)
	// Identify is off, and still the call waits.
	go func() {
		_, err := c.WaitForIdentifyConfirm(ctx(t), &emptypb.Empty{})
		done <- err
	}()
	testwait.Eventually(t, 10*time.Second, "the call to wait", func(context.Context) (bool, string) { return a.Waiting() == 1, "" })
	select {
	case err := <-done:
		t.Fatalf("returned while nothing was confirmed: %v", err)
	default:
	}
	if _, err := c.EmitEvent(ctx(t), &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_IDENTIFY_CONFIRM}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOldAgentCriticalQuirks(t *testing.T) {
	a := Start(t, Options{})
	c := dialSocket(t, a)
	if _, err := c.EmitEvent(ctx(t), &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_CRITICAL}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "critical mode", func(context.Context) (bool, string) { return a.State().Critical, "" })
	_, err := c.SetFanSpeed(ctx(t), &bladeapiv1.SetFanSpeedRequest{Percent: 20})
	if s, _ := status.FromError(err); s.Code() != codes.Unknown || !strings.Contains(s.Message(), "cannot set fan speed while the blade is in a critical state") {
		t.Errorf("SetFanSpeed in critical: %v", err)
	}
	_, err = c.SetStealthMode(ctx(t), &bladeapiv1.StealthModeRequest{Enable: true})
	if s, _ := status.FromError(err); s.Code() != codes.Unknown {
		t.Errorf("SetStealthMode in critical: %v", err)
	}
	// SetFanSpeedAuto is not refused, and drops critical mode's 100 %.
	if _, err := c.SetFanSpeedAuto(ctx(t), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if st := a.State(); st.FanOverride != nil || !st.Critical {
		t.Errorf("after SetFanSpeedAuto in critical: %+v", st)
	}
}

func TestOldAgentGetStatusTruncates(t *testing.T) {
	a := Start(t, Options{Steps: []Step{{55.9, 80}, {45, 40}}, Temperature: 51.9})
	st, err := dialSocket(t, a).GetStatus(ctx(t), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	// 40 + 40/10.9 * 6.9 = 65.3 → 65; the curve sorted and truncated.
	if st.GetTemperature() != 51 || st.GetFanPercent() != 65 || !st.GetFanSpeedAutomatic() ||
		st.GetFanCurveSteps()[0].GetTemperature() != 45 || st.GetFanCurveSteps()[1].GetTemperature() != 55 {
		t.Errorf("status %v", st)
	}
}

func TestOldAgentEmitEventIsApplied(t *testing.T) {
	a := Start(t, Options{})
	c := dialSocket(t, a)
	if _, err := c.EmitEvent(ctx(t), &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_IDENTIFY}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "identify", func(context.Context) (bool, string) { return a.State().Identify, "" })
	a.PressButton()
	testwait.Eventually(t, 10*time.Second, "the button to confirm", func(context.Context) (bool, string) { return !a.State().Identify, "" })
}

func TestOldAgentMutualTLS(t *testing.T) {
	a := Start(t, Options{TCP: true, Authenticated: true})
	e := a.BladectlEntry("blade")
	c, closeConn, err := Dial(e.Blade.Server, e.Blade.Cert.CertificateAuthorityData, e.Blade.Cert.ClientCertificateData, e.Blade.Cert.ClientKeyData)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn()
	if _, err := c.GetStatus(ctx(t), &emptypb.Empty{}); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	plain, closePlain, err := Dial(e.Blade.Server, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer closePlain()
	if _, err := plain.GetStatus(ctx(t), &emptypb.Empty{}); status.Code(err) != codes.Unavailable {
		t.Errorf("without TLS: %v", err)
	}
}
