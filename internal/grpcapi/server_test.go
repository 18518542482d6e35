package grpcapi_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/core"
	"github.com/kubeblade/kubeblade/internal/grpcapi"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/pki"
	"github.com/kubeblade/kubeblade/internal/pki/standalone"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func dial(t testing.TB, b clientconfig.Blade) *grpc.ClientConn {
	t.Helper()
	conn, err := b.Dial("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// transports runs fn against a fresh blade once over the unix socket and
// once over mutual TLS.
func transports(t *testing.T, fn func(t *testing.T, b *grpcapitest.Blade, conn *grpc.ClientConn)) {
	for name, pick := range map[string]func(*grpcapitest.Blade) clientconfig.Blade{
		"unix": (*grpcapitest.Blade).UnixBlade,
		"mtls": (*grpcapitest.Blade).TLSBlade,
	} {
		t.Run(name, func(t *testing.T) {
			b := grpcapitest.Start(t, grpcapitest.Options{TCP: true})
			fn(t, b, dial(t, pick(b)))
		})
	}
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("error = %v, want code %s", err, want)
	}
}

func TestCompatService(t *testing.T) {
	transports(t, func(t *testing.T, b *grpcapitest.Blade, conn *grpc.ClientConn) {
		c := bladeapiv1.NewBladeAgentServiceClient(conn)
		ctx := ctx(t)
		empty := &emptypb.Empty{}
		get := func() *bladeapiv1.StatusResponse {
			t.Helper()
			st, err := c.GetStatus(ctx, empty)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}

		st := get()
		if st.PowerStatus != bladeapiv1.PowerStatus_POE_802_AT || !st.FanSpeedAutomatic || st.CriticalTemperatureThreshold != 60 ||
			st.CriticalActive || st.IdentifyActive || st.StealthMode || st.FanRpm == 0 || st.Temperature == 0 {
			t.Errorf("initial status: %v", st)
		}
		if st.Version.GetVersion() != grpcapitest.Version.Version || st.Version.GetCommit() != grpcapitest.Version.Commit ||
			st.Version.GetDate() != grpcapitest.Version.Date.Unix() || len(st.FanCurveSteps) == 0 {
			t.Errorf("version / curve: %v", st)
		}

		// Identify, then confirm through the API; a waiter is released.
		if _, err := c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_IDENTIFY}); err != nil {
			t.Fatal(err)
		}
		if !get().IdentifyActive {
			t.Fatal("IDENTIFY did not start identify")
		}
		waited := make(chan error, 1)
		go func() {
			_, err := c.WaitForIdentifyConfirm(ctx, empty)
			waited <- err
		}()
		if _, err := c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_IDENTIFY_CONFIRM}); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; err != nil {
			t.Fatalf("WaitForIdentifyConfirm: %v", err)
		}
		if get().IdentifyActive {
			t.Fatal("IDENTIFY_CONFIRM did not stop identify")
		}
		// With identify off the wait returns at once.
		if _, err := c.WaitForIdentifyConfirm(ctx, empty); err != nil {
			t.Fatal(err)
		}

		// Fan.
		if _, err := c.SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: 55}); err != nil {
			t.Fatal(err)
		}
		if st := get(); st.FanPercent != 55 || st.FanSpeedAutomatic {
			t.Errorf("after SetFanSpeed 55: %v", st)
		}
		for _, p := range []int64{-1, 101, 1 << 40} {
			_, err := c.SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: p})
			wantCode(t, err, codes.InvalidArgument)
		}
		if st := get(); st.FanPercent != 55 {
			t.Errorf("a refused SetFanSpeed changed the fan: %v", st)
		}
		if _, err := c.SetFanSpeedAuto(ctx, empty); err != nil {
			t.Fatal(err)
		}
		if st := get(); !st.FanSpeedAutomatic || st.FanPercent == 55 {
			t.Errorf("after SetFanSpeedAuto: %v", st)
		}

		// Stealth.
		if _, err := c.SetStealthMode(ctx, &bladeapiv1.StealthModeRequest{Enable: true}); err != nil {
			t.Fatal(err)
		}
		if !get().StealthMode || !b.Sim.State().Stealth {
			t.Error("stealth not on")
		}
		if _, err := c.SetStealthMode(ctx, &bladeapiv1.StealthModeRequest{Enable: false}); err != nil {
			t.Fatal(err)
		}
		if get().StealthMode {
			t.Error("stealth not off")
		}

		// Events kubeblade does not take.
		before := get()
		_, err := c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_CRITICAL})
		wantCode(t, err, codes.Unimplemented)
		_, err = c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_CRITICAL_RESET})
		wantCode(t, err, codes.Unimplemented)
		_, err = c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: 42})
		wantCode(t, err, codes.InvalidArgument)
		if after := get(); after.CriticalActive != before.CriticalActive || after.IdentifyActive != before.IdentifyActive {
			t.Errorf("refused events changed state: %v", after)
		}
	})
}

func TestCompatWaitIsConfirmedByButton(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{})
	c := bladeapiv1.NewBladeAgentServiceClient(dial(t, b.UnixBlade()))
	ctx := ctx(t)
	if _, err := c.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_IDENTIFY}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := c.WaitForIdentifyConfirm(ctx, &emptypb.Empty{})
		waited <- err
	}()
	b.Sim.PressButton()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

func TestAgentService(t *testing.T) {
	transports(t, func(t *testing.T, b *grpcapitest.Blade, conn *grpc.ClientConn) {
		c := agentv1.NewAgentServiceClient(conn)
		ctx := ctx(t)
		res, err := c.GetStatus(ctx, &agentv1.GetStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		st := res.Status
		if diff := cmp.Diff([]string{"button", "fan", "leds", "poe-detect", "stealth", "tach", "temperature"}, st.Hardware.GetCapabilities()); diff != "" {
			t.Errorf("capabilities (-want +got):\n%s", diff)
		}
		if !st.Running || st.FanMode != agentv1.FanMode_FAN_MODE_AUTO || st.Hardware.GetBackend() != "simulated" ||
			st.Version.GetVersion() != grpcapitest.Version.Version || st.TemperatureCelsius == nil || st.PowerSource != "poe-802.3at" ||
			st.CriticalCelsius != 60 || len(st.Leds) != 2 || st.ConfigName != "test" {
			t.Errorf("status: %v", st)
		}
		if edge := st.Leds[1]; edge.Led != agentv1.LED_LED_EDGE || edge.Pattern != agentv1.LEDPattern_LED_PATTERN_STEADY ||
			edge.Color.GetGreen() != 0x10 || edge.Override != nil {
			t.Errorf("edge LED: %v", edge)
		}

		// Identify with wait: returns once the button confirms.
		done := make(chan *agentv1.SetIdentifyResponse, 1)
		errc := make(chan error, 1)
		go func() {
			r, err := c.SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: true, WaitForConfirm: true})
			errc <- err
			done <- r
		}()
		b.WaitFor(t, core.ReasonIdentifyStarted)
		b.Sim.PressButton()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.Status.Identify {
			t.Error("identify still on after confirmation")
		}
		r, err := c.SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: true})
		if err != nil || !r.Status.Identify {
			t.Fatalf("SetIdentify on: %v %v", r, err)
		}
		if r, err = c.SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: false}); err != nil || r.Status.Identify {
			t.Fatalf("SetIdentify off: %v %v", r, err)
		}

		// Stealth: on, off, back to the configured mode.
		for _, tc := range []struct {
			mode              agentv1.StealthMode
			stealth, override bool
		}{
			{agentv1.StealthMode_STEALTH_MODE_ON, true, true},
			{agentv1.StealthMode_STEALTH_MODE_OFF, false, true},
			{agentv1.StealthMode_STEALTH_MODE_CONFIGURED, false, false},
		} {
			r, err := c.SetStealth(ctx, &agentv1.SetStealthRequest{Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.Stealth != tc.stealth || (r.Status.StealthOverride != nil) != tc.override {
				t.Errorf("%s: %v", tc.mode, r.Status)
			}
		}
		_, err = c.SetStealth(ctx, &agentv1.SetStealthRequest{})
		wantCode(t, err, codes.InvalidArgument)

		// Fan.
		fr, err := c.SetFan(ctx, &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Percent{Percent: 70}})
		if err != nil || fr.Status.FanPercent != 70 || fr.Status.FanMode != agentv1.FanMode_FAN_MODE_MANUAL || fr.Status.GetManualFanPercent() != 70 {
			t.Fatalf("SetFan 70: %v %v", fr, err)
		}
		for name, req := range map[string]*agentv1.SetFanRequest{
			"101":        {Mode: &agentv1.SetFanRequest_Percent{Percent: 101}},
			"auto=false": {Mode: &agentv1.SetFanRequest_Auto{Auto: false}},
			"empty":      {},
		} {
			_, err := c.SetFan(ctx, req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("SetFan %s: %v", name, err)
			}
		}
		if b.Agent.Status().FanPercent != 70 {
			t.Error("refused SetFan changed the fan")
		}
		if fr, err = c.SetFan(ctx, &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Auto{Auto: true}}); err != nil ||
			fr.Status.FanMode != agentv1.FanMode_FAN_MODE_AUTO {
			t.Fatalf("SetFan auto: %v %v", fr, err)
		}

		// LED colour override and release.
		lr, err := c.SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED_LED_EDGE,
			Action: &agentv1.SetLEDColorRequest_Color{Color: &agentv1.Color{Red: 1, Green: 2, Blue: 3}}})
		if err != nil || lr.Status.Leds[1].Override.GetBlue() != 3 {
			t.Fatalf("SetLEDColor: %v %v", lr, err)
		}
		if got := b.Sim.State().EdgeLED; got != "#010203" {
			t.Errorf("edge LED on the hardware = %s, want #010203", got)
		}
		for name, req := range map[string]*agentv1.SetLEDColorRequest{
			"no LED":      {Action: &agentv1.SetLEDColorRequest_Clear{Clear: true}},
			"256":         {Led: agentv1.LED_LED_TOP, Action: &agentv1.SetLEDColorRequest_Color{Color: &agentv1.Color{Red: 256}}},
			"clear=false": {Led: agentv1.LED_LED_TOP, Action: &agentv1.SetLEDColorRequest_Clear{}},
			"no action":   {Led: agentv1.LED_LED_TOP},
		} {
			_, err := c.SetLEDColor(ctx, req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("SetLEDColor %s: %v", name, err)
			}
		}
		if lr, err = c.SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED_LED_EDGE,
			Action: &agentv1.SetLEDColorRequest_Clear{Clear: true}}); err != nil || lr.Status.Leds[1].Override != nil {
			t.Fatalf("clear: %v %v", lr, err)
		}

		// Health.
		h := healthpb.NewHealthClient(conn)
		for _, svc := range []string{"", "api.bladeapi.v1alpha1.BladeAgentService", "kubeblade.agent.v1alpha1.AgentService"} {
			hr, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health %q: %v %v", svc, hr, err)
			}
		}
	})
}

func TestWatchStatusSeesButtonIdentifyAndCritical(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{})
	c := agentv1.NewAgentServiceClient(dial(t, b.UnixBlade()))
	ctx := ctx(t)
	w, err := c.WatchStatus(ctx, &agentv1.WatchStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.Event != nil || !first.Status.Running {
		t.Fatalf("first message: %v", first)
	}
	// next returns the next message carrying the reason, checking that
	// its status already shows the event's effect.
	next := func(reason core.Reason) *agentv1.Status {
		t.Helper()
		for {
			m, err := w.Recv()
			if err != nil {
				t.Fatalf("waiting for %s: %v", reason, err)
			}
			if m.Event.GetReason() == string(reason) {
				return m.Status
			}
		}
	}
	b.Sim.PressButton()
	next(core.ReasonButtonPressed)
	if st := next(core.ReasonIdentifyStarted); !st.Identify {
		t.Error("IdentifyStarted with identify off")
	}
	if _, err := c.SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: false}); err != nil {
		t.Fatal(err)
	}
	if st := next(core.ReasonIdentifyStopped); st.Identify {
		t.Error("IdentifyStopped with identify on")
	}
	b.Sim.SetTemperature(80)
	b.Clock.Step(time.Second)
	st := next(core.ReasonCriticalTemperature)
	if !st.Critical || st.FanPercent != 100 || st.FanMode != agentv1.FanMode_FAN_MODE_CRITICAL {
		t.Errorf("critical status: %v", st)
	}
}

func TestCriticalRefusesFanOverride(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{})
	conn := dial(t, b.UnixBlade())
	ctx := ctx(t)
	b.Overheat(t, 80)
	_, err := agentv1.NewAgentServiceClient(conn).SetFan(ctx, &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Percent{Percent: 30}})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = bladeapiv1.NewBladeAgentServiceClient(conn).SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: 30})
	wantCode(t, err, codes.FailedPrecondition)
	if st := b.Agent.Status(); st.FanPercent != 100 || st.ManualFan || b.Sim.State().FanPercent != 100 {
		t.Errorf("a refused override changed the fan: %+v", st)
	}
}

func TestMutualTLSIsMandatory(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{TCP: true})
	good := b.TLSBlade()
	caPEM, admin, err := good.Credentials("")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	other, _, err := pki.NewCA("someone else", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(pki.Request{CommonName: "intruder", Usage: pki.UsageClient}, now)
	if err != nil {
		t.Fatal(err)
	}
	caKP := pki.KeyPair{}
	if caKP.CertPEM, err = os.ReadFile(filepath.Join(b.StateDir, standalone.CACert)); err != nil {
		t.Fatal(err)
	}
	if caKP.KeyPEM, err = os.ReadFile(filepath.Join(b.StateDir, standalone.CAKey)); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(caKP)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := ca.Issue(pki.Request{CommonName: "old", Usage: pki.UsageClient,
		NotBefore: now.Add(-48 * time.Hour), Lifetime: 24 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	serverOnly, err := ca.Issue(pki.Request{CommonName: "not-a-client", Usage: pki.UsageServer}, now)
	if err != nil {
		t.Fatal(err)
	}

	tlsCreds := func(client pki.KeyPair, mutate func(*tls.Config)) grpc.DialOption {
		cfg, err := pki.ClientTLSConfig(caPEM, client, "localhost")
		if err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			mutate(cfg)
		}
		return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
	}
	cases := map[string]grpc.DialOption{
		"plaintext":                   grpc.WithTransportCredentials(insecure.NewCredentials()),
		"no client certificate":       tlsCreds(pki.KeyPair{}, nil),
		"certificate from another CA": tlsCreds(foreign, nil),
		"expired certificate":         tlsCreds(expired, nil),
		"server-only certificate":     tlsCreds(serverOnly, nil),
		"TLS 1.2": tlsCreds(admin, func(c *tls.Config) {
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		}),
	}
	for name, creds := range cases {
		t.Run(name, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///"+b.TCPAddr, creds)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = agentv1.NewAgentServiceClient(conn).GetStatus(c, &agentv1.GetStatusRequest{})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("GetStatus = %v, want Unavailable (refused)", err)
			}
		})
	}
	t.Run("admin certificate", func(t *testing.T) {
		conn, err := grpc.NewClient("passthrough:///"+b.TCPAddr, tlsCreds(admin, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := agentv1.NewAgentServiceClient(conn).GetStatus(ctx(t), &agentv1.GetStatusRequest{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestServeRefusesPlaintextTCP(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := grpcapi.New(grpcapi.Options{Agent: b.Agent})
	if err := srv.Serve(ctx(t), ln, nil); err == nil {
		t.Fatal("served plaintext TCP")
	}
	if err := srv.Serve(ctx(t), ln, &tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("served TLS 1.2")
	}
}

func TestSocketPermissions(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{})
	fi, err := os.Stat(b.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode = %v, want srw-rw----", fi.Mode())
	}
}
