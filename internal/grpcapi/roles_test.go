package grpcapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/grpcapi"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/pki"
)

// rpc is one call of every method the server serves, with arguments that
// would visibly change the blade when the method changes something.
type rpc struct {
	method string
	call   func(ctx context.Context, conn *grpc.ClientConn) error
}

// rpcs are in an order that works for a caller allowed everything: reads
// (and the identify wait, which returns at once while identify is off)
// before changes.
var rpcs = []rpc{
	{bladeapiv1.BladeAgentService_GetStatus_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := bladeapiv1.NewBladeAgentServiceClient(c).GetStatus(ctx, &emptypb.Empty{})
		return err
	}},
	{bladeapiv1.BladeAgentService_WaitForIdentifyConfirm_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := bladeapiv1.NewBladeAgentServiceClient(c).WaitForIdentifyConfirm(ctx, &emptypb.Empty{})
		return err
	}},
	{agentv1.AgentService_GetStatus_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := agentv1.NewAgentServiceClient(c).GetStatus(ctx, &agentv1.GetStatusRequest{})
		return err
	}},
	{agentv1.AgentService_WatchStatus_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := agentv1.NewAgentServiceClient(c).WatchStatus(ctx, &agentv1.WatchStatusRequest{})
		if err != nil {
			return err
		}
		_, err = w.Recv()
		return err
	}},
	{healthpb.Health_Check_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}},
	{healthpb.Health_List_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(c).List(ctx, &healthpb.HealthListRequest{})
		return err
	}},
	{healthpb.Health_Watch_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := healthpb.NewHealthClient(c).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = w.Recv()
		return err
	}},
	{bladeapiv1.BladeAgentService_SetFanSpeed_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := bladeapiv1.NewBladeAgentServiceClient(c).SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: 7})
		return err
	}},
	{bladeapiv1.BladeAgentService_SetFanSpeedAuto_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := bladeapiv1.NewBladeAgentServiceClient(c).SetFanSpeedAuto(ctx, &emptypb.Empty{})
		return err
	}},
	{bladeapiv1.BladeAgentService_SetStealthMode_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := bladeapiv1.NewBladeAgentServiceClient(c).SetStealthMode(ctx, &bladeapiv1.StealthModeRequest{Enable: true})
		return err
	}},
	{bladeapiv1.BladeAgentService_EmitEvent_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := bladeapiv1.NewBladeAgentServiceClient(c).EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event_IDENTIFY})
		return err
	}},
	{agentv1.AgentService_SetIdentify_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := agentv1.NewAgentServiceClient(c).SetIdentify(ctx, &agentv1.SetIdentifyRequest{On: true})
		return err
	}},
	{agentv1.AgentService_SetStealth_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := agentv1.NewAgentServiceClient(c).SetStealth(ctx, &agentv1.SetStealthRequest{Mode: agentv1.StealthMode_STEALTH_MODE_ON})
		return err
	}},
	{agentv1.AgentService_SetFan_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := agentv1.NewAgentServiceClient(c).SetFan(ctx, &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Percent{Percent: 9}})
		return err
	}},
	{agentv1.AgentService_SetLEDColor_FullMethodName, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := agentv1.NewAgentServiceClient(c).SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED_LED_TOP,
			Action: &agentv1.SetLEDColorRequest_Color{Color: &agentv1.Color{Red: 255}}})
		return err
	}},
}

// TestEveryRPCIsCalledHere keeps rpcs complete: a method added to a
// service must get a rule in AccessPolicy (Serve refuses to start
// otherwise) and a call here, so its rule is tested.
func TestEveryRPCIsCalledHere(t *testing.T) {
	var called []string
	for _, r := range rpcs {
		called = append(called, r.method)
	}
	for m := range grpcapi.AccessPolicy {
		if !slices.Contains(called, m) {
			t.Errorf("%s has an access rule but no call in rpcs", m)
		}
	}
}

// auditLog collects the server's audit lines.
type auditLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *auditLog) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

func (a *auditLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(a.buf.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func startAudited(t *testing.T) (*grpcapitest.Blade, *auditLog) {
	log := &auditLog{}
	b := grpcapitest.Start(t, grpcapitest.Options{TCP: true, Audit: slog.New(slog.NewJSONHandler(log, nil))})
	return b, log
}

// clientWith dials the blade's mutual-TLS port with a fresh client
// certificate from the blade's own CA carrying orgs.
func clientWith(t *testing.T, b *grpcapitest.Blade, cn string, orgs ...string) *grpc.ClientConn {
	t.Helper()
	kp, err := b.CA(t).Issue(pki.Request{CommonName: cn, Organization: orgs, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := b.TLSBlade().Credentials("")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ClientTLSConfig(caPEM, kp, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(b.TCPAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestClientCertificateRoles: over mutual TLS, the role in the client
// certificate's Organization decides every RPC of both services; a refused
// call changes nothing, and every change and every refusal is audited with
// who, which RPC, its arguments and the result.
func TestClientCertificateRoles(t *testing.T) {
	for name, tc := range map[string]struct {
		orgs []string
		role pki.Role
	}{
		"viewer":                  {[]string{pki.OrgViewers}, pki.RoleViewer},
		"operator":                {[]string{pki.OrgOperators}, pki.RoleOperator},
		"admin from before roles": {[]string{pki.OrgAdmins}, pki.RoleOperator},
		"no role":                 {[]string{"example.com"}, pki.RoleNone},
		"two roles":               {[]string{pki.OrgViewers, pki.OrgOperators}, -1},
	} {
		t.Run(name, func(t *testing.T) {
			b, audit := startAudited(t)
			conn := clientWith(t, b, "alice", tc.orgs...)
			var wantAudit []string
			for _, r := range rpcs {
				rule := grpcapi.AccessPolicy[r.method]
				err := r.call(ctx(t), conn)
				want := codes.OK
				if tc.role < rule.Role {
					want = codes.PermissionDenied
				}
				if got := status.Code(err); got != want {
					t.Errorf("%s: %v, want %s", r.method, err, want)
				}
				if rule.Audit || want != codes.OK {
					wantAudit = append(wantAudit, r.method+" "+want.String())
				}
			}
			if tc.role < pki.RoleOperator {
				st := b.Agent.Status()
				if st.ManualFan || st.Stealth || st.Identify || st.LEDOverride[0] != nil {
					t.Errorf("refused calls changed the blade: %+v", st)
				}
			}
			var gotAudit []string
			for _, l := range audit.lines(t) {
				gotAudit = append(gotAudit, fmt.Sprint(l["rpc"], " ", l["result"]))
				if l["msg"] != "audit" || l["transport"] != "tls" || !strings.Contains(fmt.Sprint(l["who"]), "CN=alice") {
					t.Errorf("audit line does not say who called: %v", l)
				}
				if l["rpc"] == bladeapiv1.BladeAgentService_SetFanSpeed_FullMethodName && l["args"] != `{"percent":"7"}` {
					t.Errorf("audit line of SetFanSpeed: args %v, want the percent", l["args"])
				}
			}
			if !slices.Equal(gotAudit, wantAudit) {
				t.Errorf("audit log:\n got  %q\n want %q", gotAudit, wantAudit)
			}
		})
	}
}

// TestUnixSocketCallersAreAudited: a unix-socket caller may do everything
// (the socket's mode and group decide who can connect) and is named in the
// audit log by the credentials the kernel reports for it.
func TestUnixSocketCallersAreAudited(t *testing.T) {
	b, audit := startAudited(t)
	conn := dial(t, b.UnixBlade())
	// Percent 0 (the fan off): on 8f44781 the line said args={}.
	if _, err := bladeapiv1.NewBladeAgentServiceClient(conn).SetFanSpeed(ctx(t), &bladeapiv1.SetFanSpeedRequest{Percent: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := bladeapiv1.NewBladeAgentServiceClient(conn).GetStatus(ctx(t), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	lines := audit.lines(t)
	if len(lines) != 1 {
		t.Fatalf("audit lines %v, want one for SetFanSpeed", lines)
	}
	l := lines[0]
	who := fmt.Sprint(l["who"])
	if l["transport"] != "unix" || l["role"] != "operator" || l["result"] != "OK" ||
		!strings.Contains(who, fmt.Sprintf("uid=%d", os.Getuid())) || l["pid"] != float64(os.Getpid()) {
		t.Errorf("audit line %v: want this process's uid and pid", l)
	}
	if l["args"] != `{"percent":"0"}` {
		t.Errorf("audit line of SetFanSpeed{0}: args %v, want the zero percent", l["args"])
	}
}
