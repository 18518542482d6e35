package reliability

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	bladeapiv1 "github.com/kubeblade/kubeblade/api/bladeapi/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/grpcapi/grpcapitest"
	"github.com/kubeblade/kubeblade/internal/pki/standalone"
	"github.com/kubeblade/kubeblade/internal/smartfan"
	"github.com/kubeblade/kubeblade/internal/smartfan/smartfantest"
	"github.com/kubeblade/kubeblade/internal/smartfan/uart"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// observable is what a person could see of a blade: bad input must not
// change any of it.
type observable struct {
	Identify, Stealth, Critical bool
	FanMode                     string
	FanPercent                  uint8
	TopLED, EdgeLED             string
}

func observe(b *blade) observable {
	st := b.agent.Status()
	return observable{Identify: st.Identify, Stealth: st.Stealth, Critical: st.Critical,
		FanMode: string(st.FanMode), FanPercent: st.FanPercent,
		TopLED: b.sim.State().TopLED, EdgeLED: b.sim.State().EdgeLED}
}

// TestBadAnnotations: each invalid value gets an InvalidAnnotation Warning
// naming it and changes nothing.
func TestBadAnnotations(t *testing.T) {
	needCP(t)
	b := startBlade(t, "rel-annotations", nil)
	cases := []struct{ key, value string }{
		{kbv1.AnnotationIdentify, "maybe"},
		{kbv1.AnnotationIdentify, "yes"},
		{kbv1.AnnotationIdentify, "1"},
		{kbv1.AnnotationIdentify, ""},
		{kbv1.AnnotationStealth, "on"},
		{kbv1.AnnotationStealth, "TRUE!"},
		{kbv1.AnnotationFanSpeed, "120"},
		{kbv1.AnnotationFanSpeed, "-5"},
		{kbv1.AnnotationFanSpeed, "fast"},
		{kbv1.AnnotationFanSpeed, "50 percent"},
		{kbv1.AnnotationFanSpeed, "4.5"},
		{kbv1.AnnotationFanSpeed, strings.Repeat("9", 300)},
	}
	for _, tc := range cases {
		before := observe(b)
		annotate(t, b.node, map[string]any{tc.key: tc.value})
		clear := false
		testwait.Eventually(t, 30*time.Second, fmt.Sprintf("InvalidAnnotation Warning for %s=%q", tc.key, tc.value), func(context.Context) (bool, string) {
			evs, err := events(b.node, "InvalidAnnotation")
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs {
				if e.Type == "Warning" && strings.Contains(e.Note, tc.key) && strings.Contains(e.Note, fmt.Sprintf("%q", tc.value)) {
					clear = true
					return true, ""
				}
			}
			var notes []string
			for _, e := range evs {
				c := int32(1)
				if e.Series != nil {
					c = e.Series.Count
				}
				notes = append(notes, fmt.Sprintf("%s (x%d)", e.Note, c))
			}
			return false, strings.Join(notes, " | ")
		})
		summary.bad("annotation", clear)
		// The Warning is recorded after the reporter has handled the
		// annotation, so the agent's state is final here.
		if d := cmp.Diff(before, observe(b)); d != "" {
			summary.lose(t, "annotation %s=%q changed the blade (-before +after):\n%s", tc.key, tc.value, d)
		}
		// Remove it before the next case; removing is a valid request
		// (back to the defaults the blade already has).
		annotate(t, b.node, map[string]any{tc.key: nil})
	}
	// The blade still obeys a valid annotation afterwards.
	annotate(t, b.node, map[string]any{kbv1.AnnotationFanSpeed: "42"})
	testwait.Eventually(t, 10*time.Second, "valid fan-speed annotation after the bad ones", func(context.Context) (bool, string) {
		return b.sim.State().FanPercent == 42, fmt.Sprint(b.sim.State().FanPercent)
	})
}

// TestBadBladeConfigs: every OpenAPI and CEL rule refuses a spec that
// breaks it, on create and on update, and the stored object stays as it was.
func TestBadBladeConfigs(t *testing.T) {
	needCP(t)
	cases := map[string]struct {
		mutate func(s *kbv1.BladeConfigSpec)
		want   string
	}{
		"percent 120": {func(s *kbv1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: 120}}
		}, "should be less than or equal to 100"},
		"negative percent": {func(s *kbv1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: -1}}
		}, "should be greater than or equal to 0"},
		"descending curve": {func(s *kbv1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 55, Percent: 40}, {TemperatureCelsius: 45, Percent: 80}}
		}, "fanCurve temperatures must ascend strictly"},
		"duplicate temperature": {func(s *kbv1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 45, Percent: 40}, {TemperatureCelsius: 45, Percent: 80}}
		}, "fanCurve temperatures must ascend strictly"},
		"hysteresis equal to critical": {func(s *kbv1.BladeConfigSpec) {
			s.Agent.CriticalCelsius, s.Agent.HysteresisCelsius = 40, 40
		}, "hysteresisCelsius must be below criticalCelsius"},
		"hysteresis above critical": {func(s *kbv1.BladeConfigSpec) {
			s.Agent.CriticalCelsius, s.Agent.HysteresisCelsius = 50, 60
		}, "hysteresisCelsius must be below criticalCelsius"},
		"critical too high": {func(s *kbv1.BladeConfigSpec) { s.Agent.CriticalCelsius = 150 }, "should be less than or equal to 110"},
		"bad idle colour":   {func(s *kbv1.BladeConfigSpec) { s.Agent.LEDs.IdleColor = "green" }, "idleColor"},
		"bad critical colour": {func(s *kbv1.BladeConfigSpec) { s.Agent.LEDs.CriticalColor = "#12345" },
			"criticalColor"},
		"bad backend":       {func(s *kbv1.BladeConfigSpec) { s.Agent.Hardware.Backend = "mmio" }, "Unsupported value"},
		"bad pull policy":   {func(s *kbv1.BladeConfigSpec) { s.DaemonSet.ImagePullPolicy = "Sometimes" }, "Unsupported value"},
		"port out of range": {func(s *kbv1.BladeConfigSpec) { s.Agent.GRPC.Remote.Port = 70000 }, "should be less than or equal to 65535"},
		"toleration effect": {func(s *kbv1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: "NoScheduleAtAll"}}
		}, "toleration effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		"toleration operator": {func(s *kbv1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: "Matches", Value: "x"}}
		}, "toleration operator must be Exists or Equal"},
		"toleration Exists with a value": {func(s *kbv1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "x"}}
		}, "a toleration with operator Exists takes no value"},
		"bad image reference": {func(s *kbv1.BladeConfigSpec) { s.DaemonSet.Image = "ghcr.io/KubeBlade/kubeblade:v0.1.0" }, "spec.daemonSet.image"},
		"negative hysteresis": {func(s *kbv1.BladeConfigSpec) { s.Agent.HysteresisCelsius = -1 },
			"should be greater than or equal to 1"},
		"too many steps": {func(s *kbv1.BladeConfigSpec) {
			for i := 0; i < 17; i++ {
				s.Agent.FanCurve = append(s.Agent.FanCurve, agentconfigv1.FanCurveStep{TemperatureCelsius: int32(i), Percent: 50})
			}
		}, "must have at most 16 items"},
		"metrics address without a port": {func(s *kbv1.BladeConfigSpec) { s.Agent.Metrics.BindAddress = "0.0.0.0" },
			"bindAddress must be host:port"},
		"metrics address port out of range": {func(s *kbv1.BladeConfigSpec) { s.Agent.Metrics.BindAddress = "127.0.0.1:99999" },
			"bindAddress must be host:port"},
		"metrics disabled": {func(s *kbv1.BladeConfigSpec) { s.Agent.Metrics.BindAddress = "0" },
			`metrics.bindAddress cannot be "0" in a BladeConfig`},
	}
	ctx := context.Background()
	good := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "rel-valid"}}
	good.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"reliability": "none"}}
	good.Spec.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: 20}, {TemperatureCelsius: 60, Percent: 100}}
	if err := k8s.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	stored := good.DeepCopy()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bc := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "rel-bad-" + strings.ToLower(strings.ReplaceAll(name, " ", "-"))}}
			tc.mutate(&bc.Spec)
			err := k8s.Create(ctx, bc)
			clear := err != nil && apierrors.IsInvalid(err) && strings.Contains(err.Error(), tc.want)
			summary.bad("BladeConfig create", clear)
			if !clear {
				t.Errorf("create: error = %v, want Invalid containing %q", err, tc.want)
			}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(bc), &kbv1.BladeConfig{}); !apierrors.IsNotFound(err) {
				t.Errorf("refused BladeConfig exists anyway: %v", err)
			}

			upd := stored.DeepCopy()
			tc.mutate(&upd.Spec)
			err = k8s.Update(ctx, upd)
			clear = err != nil && apierrors.IsInvalid(err) && strings.Contains(err.Error(), tc.want)
			summary.bad("BladeConfig update", clear)
			if !clear {
				t.Errorf("update: error = %v, want Invalid containing %q", err, tc.want)
			}
			now := &kbv1.BladeConfig{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(good), now); err != nil {
				t.Fatal(err)
			}
			if now.Generation != stored.Generation || !cmp.Equal(now.Spec, stored.Spec) {
				summary.lose(t, "refused update changed BladeConfig %s: %s", good.Name, cmp.Diff(stored.Spec, now.Spec))
			}
		})
	}
}

// TestMalformedGRPC: out-of-range values, unknown enums and garbage bytes
// on the socket get InvalidArgument (or a closed connection) and leave the
// agent as it was.
func TestMalformedGRPC(t *testing.T) {
	b := grpcapitest.Start(t, grpcapitest.Options{})
	conn, err := b.UnixBlade().Dial("")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	compat := bladeapiv1.NewBladeAgentServiceClient(conn)
	svc := agentv1.NewAgentServiceClient(conn)
	ctx := context.Background()
	before, err := compat.GetStatus(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"compat fan 120": func() error {
			_, err := compat.SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: 120})
			return err
		},
		"compat fan -1": func() error {
			_, err := compat.SetFanSpeed(ctx, &bladeapiv1.SetFanSpeedRequest{Percent: -1})
			return err
		},
		"compat unknown event 99": func() error {
			_, err := compat.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event(99)})
			return err
		},
		"compat unknown event -7": func() error {
			_, err := compat.EmitEvent(ctx, &bladeapiv1.EmitEventRequest{Event: bladeapiv1.Event(-7)})
			return err
		},
		"fan 101": func() error {
			_, err := svc.SetFan(ctx, &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Percent{Percent: 101}})
			return err
		},
		"fan without mode": func() error {
			_, err := svc.SetFan(ctx, &agentv1.SetFanRequest{})
			return err
		},
		"fan auto false": func() error {
			_, err := svc.SetFan(ctx, &agentv1.SetFanRequest{Mode: &agentv1.SetFanRequest_Auto{Auto: false}})
			return err
		},
		"stealth unknown mode": func() error {
			_, err := svc.SetStealth(ctx, &agentv1.SetStealthRequest{Mode: agentv1.StealthMode(42)})
			return err
		},
		"stealth unspecified": func() error {
			_, err := svc.SetStealth(ctx, &agentv1.SetStealthRequest{})
			return err
		},
		"LED unknown": func() error {
			_, err := svc.SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED(9), Action: &agentv1.SetLEDColorRequest_Clear{Clear: true}})
			return err
		},
		"LED colour 256": func() error {
			_, err := svc.SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED_LED_EDGE,
				Action: &agentv1.SetLEDColorRequest_Color{Color: &agentv1.Color{Red: 256}}})
			return err
		},
		"LED clear false": func() error {
			_, err := svc.SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED_LED_TOP,
				Action: &agentv1.SetLEDColorRequest_Clear{Clear: false}})
			return err
		},
		"LED without action": func() error {
			_, err := svc.SetLEDColor(ctx, &agentv1.SetLEDColorRequest{Led: agentv1.LED_LED_TOP})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		st, _ := status.FromError(err)
		clear := err != nil && st.Code() == codes.InvalidArgument && st.Message() != ""
		summary.bad("gRPC request", clear)
		if !clear {
			t.Errorf("%s: error = %v, want InvalidArgument with a message", name, err)
		}
	}
	// Garbage that is not HTTP/2 at all, on fresh connections.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		c, err := net.Dial("unix", b.Socket)
		if err != nil {
			t.Fatal(err)
		}
		junk := make([]byte, 1+rng.IntN(4096))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		_, _ = c.Write(junk)
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Read(make([]byte, 512)) // the server answers with a GOAWAY or closes
		c.Close()
		summary.bad("gRPC socket garbage", true)
	}
	after, err := compat.GetStatus(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatalf("agent no longer answers after bad requests: %v", err)
	}
	type view struct {
		Stealth, Identify, Critical, Auto bool
		Fan                               uint32
	}
	v := func(s *bladeapiv1.StatusResponse) view {
		return view{s.StealthMode, s.IdentifyActive, s.CriticalActive, s.FanSpeedAutomatic, s.FanPercent}
	}
	if d := cmp.Diff(v(before), v(after)); d != "" {
		summary.lose(t, "bad gRPC requests changed the agent (-before +after):\n%s", d)
	}
}

// TestUARTGarbage: random bytes from the smart fan unit, between and inside
// valid frames, never crash the link, and valid frames after them are
// still decoded.
func TestUARTGarbage(t *testing.T) {
	master, path := smartfantest.OpenPTY(t)
	c := uart.New(uart.Options{Dial: uart.Serial(path), RetryInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	rng := rand.New(rand.NewPCG(3, 4))
	for round := 1; round <= 20; round++ {
		junk := make([]byte, 64+rng.IntN(1024))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		if _, err := master.Write(junk); err != nil {
			t.Fatal(err)
		}
		// A valid RPM report right after the garbage: a start byte always
		// begins a new frame, so it must be decoded whatever came before.
		rpm := uint32(1000 + round)
		if _, err := master.Write(smartfan.Encode(smartfan.ValueFrame(smartfan.ReportFanRPM, rpm*10))); err != nil {
			t.Fatal(err)
		}
		ok := testwait.Poll(t.Context(), smartfantest.Timeout, func(context.Context) (bool, string) {
			v, err := c.FanRPM()
			return err == nil && v == float64(rpm), ""
		}) == nil
		summary.bad("UART garbage burst", ok)
		if !ok {
			v, err := c.FanRPM()
			summary.lose(t, "valid RPM frame after garbage round %d not decoded (have %v, %v)", round, v, err)
		}
	}
	st := c.Stats()
	if st.Skipped+st.Malformed+st.ChecksumErrors == 0 {
		t.Errorf("garbage was not counted: %+v", st)
	}
	t.Logf("decoder stats after garbage: %+v", st)
}

// TestCorruptStateDir: garbage certificate and key files in the agent's
// state directory are replaced with working ones (or refused with an error
// naming the file), never a crash; a good CA is never thrown away because a
// leaf beside it is broken, so clients that trust it keep working.
func TestCorruptStateDir(t *testing.T) {
	garbage := []byte("-----BEGIN CERTIFICATE-----\nnot base64 at all!!\n-----END CERTIFICATE-----\n")
	rng := rand.New(rand.NewPCG(5, 6))
	random := make([]byte, 2048)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	issue := func(dir string) (*standalone.Issuer, error) {
		return standalone.New(standalone.Options{Dir: dir, Hostname: "rel-blade", Addresses: func() ([]net.IP, error) { return nil, nil }})
	}
	fresh := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "state")
		if _, err := issue(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cases := map[string]struct {
		corrupt func(dir string)
		keepsCA bool // the CA must survive unchanged
	}{
		"garbage PEM in every file": {func(dir string) {
			for _, f := range []string{standalone.CACert, standalone.CAKey, standalone.ServerCert, standalone.ServerKey, standalone.AdminCert, standalone.AdminKey} {
				_ = os.WriteFile(filepath.Join(dir, f), garbage, 0o600)
			}
		}, false},
		"random bytes in the CA key": {func(dir string) { _ = os.WriteFile(filepath.Join(dir, standalone.CAKey), random, 0o600) }, false},
		"empty serving certificate":  {func(dir string) { _ = os.WriteFile(filepath.Join(dir, standalone.ServerCert), nil, 0o600) }, true},
		"random serving key":         {func(dir string) { _ = os.WriteFile(filepath.Join(dir, standalone.ServerKey), random, 0o600) }, true},
		"admin certificate truncated": {func(dir string) {
			p := filepath.Join(dir, standalone.AdminCert)
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, b[:len(b)/2], 0o600)
		}, true},
		"serving key from another pair": {func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, standalone.AdminKey))
			_ = os.WriteFile(filepath.Join(dir, standalone.ServerKey), b, 0o600)
		}, true},
		"serving certificate deleted": {func(dir string) { _ = os.Remove(filepath.Join(dir, standalone.ServerCert)) }, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := fresh(t)
			caBefore, _ := os.ReadFile(filepath.Join(dir, standalone.CACert))
			tc.corrupt(dir)
			iss, err := issue(dir)
			clear := err == nil
			if err == nil {
				clear = servesWithItsCA(t, iss)
			}
			summary.bad("corrupt state dir", clear)
			if !clear {
				t.Fatalf("issuer on a corrupt state directory: %v", err)
			}
			caAfter, _ := os.ReadFile(filepath.Join(dir, standalone.CACert))
			if tc.keepsCA && !bytes.Equal(caBefore, caAfter) {
				summary.lose(t, "%s: a good CA was replaced", name)
			}
		})
	}
	// A file that cannot be read at all (a directory in its place) is
	// refused with an error naming it, not a panic.
	t.Run("CA certificate is a directory", func(t *testing.T) {
		dir := fresh(t)
		p := filepath.Join(dir, standalone.CACert)
		_ = os.Remove(p)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := issue(dir)
		clear := err != nil && strings.Contains(err.Error(), standalone.CACert)
		summary.bad("corrupt state dir", clear)
		if !clear {
			t.Fatalf("error = %v, want one naming %s", err, standalone.CACert)
		}
		if _, err := os.Stat(filepath.Join(dir, standalone.CAKey)); err != nil {
			summary.lose(t, "CA key gone after a refused start: %v", err)
		}
	})
}

// servesWithItsCA checks the issuer's serving certificate verifies against
// the CA it hands to clients.
func servesWithItsCA(t *testing.T, iss *standalone.Issuer) bool {
	t.Helper()
	cert, err := iss.ServingCertificate()
	if err != nil {
		t.Errorf("serving certificate: %v", err)
		return false
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Errorf("parsing: %v", err)
		return false
	}
	pool, err := iss.ClientCAs()
	if err != nil {
		t.Errorf("CA pool: %v", err)
		return false
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "rel-blade", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify against the CA: %v", err)
		return false
	}
	return true
}
