package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

var c client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: []string{"config/crd/bases"}}, func(e *testenv.Env) {
		s := runtime.NewScheme()
		_ = v1alpha1.AddToScheme(s)
		_ = apiextensionsv1.AddToScheme(s)
		var err error
		if c, err = client.New(e.Config, client.Options{Scheme: s}); err != nil {
			panic(err)
		}
	}))
}

func ctx(t *testing.T) context.Context {
	cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return cx
}

func TestBladeConfigValidation(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		mutate func(s *v1alpha1.BladeConfigSpec)
		want   string // empty: accepted
	}{
		"defaults": {func(s *v1alpha1.BladeConfigSpec) {}, ""},
		"full valid": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: 20}, {TemperatureCelsius: 60, Percent: 100}}
			s.Agent.CriticalCelsius, s.Agent.HysteresisCelsius = 70, 10
			s.Agent.LEDs.IdleColor = "#00ff00"
			s.DaemonSet.ImagePullPolicy = "IfNotPresent"
		}, ""},
		"percent 120": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: 120}}
		}, "should be less than or equal to 100"},
		"negative percent": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 40, Percent: -1}}
		}, "should be greater than or equal to 0"},
		"descending curve": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 55, Percent: 40}, {TemperatureCelsius: 45, Percent: 80}}
		}, "fanCurve temperatures must ascend strictly"},
		"duplicate temperature": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanCurve = []agentconfigv1.FanCurveStep{{TemperatureCelsius: 45, Percent: 40}, {TemperatureCelsius: 45, Percent: 80}}
		}, "fanCurve temperatures must ascend strictly"},
		"hysteresis equal to critical": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.CriticalCelsius, s.Agent.HysteresisCelsius = 40, 40
		}, "hysteresisCelsius must be below criticalCelsius"},
		"critical too high": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.CriticalCelsius = 150
		}, "should be less than or equal to 110"},
		"bad colour": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.LEDs.CriticalColor = "red"
		}, "criticalColor"},
		"bad backend": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Hardware.Backend = "mmio"
		}, "Unsupported value"},
		"bind address": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.GRPC.Remote.BindAddress = "10.0.0.5"
		}, ""},
		"bind address v6": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.GRPC.Remote.BindAddress = "fd00::5"
		}, ""},
		"bind address a host name": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.GRPC.Remote.BindAddress = "blade1.local"
		}, "bindAddress must be an IP address"},
		"bind address with a port": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.GRPC.Remote.BindAddress = "10.0.0.5:8081"
		}, "bindAddress must be an IP address"},
		"bad pull policy": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.ImagePullPolicy = "Sometimes"
		}, "Unsupported value"},
		"port out of range": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.GRPC.Remote.Port = 70000
		}, "should be less than or equal to 65535"},
		"cluster-aware settings": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanPeerLostPercent = ptr(70)
			s.Agent.LEDs.MaintenanceColor, s.Agent.LEDs.SafeToPullColor, s.Agent.LEDs.NodeAttentionColor = "#ff8000", "#0000ff", "#ffff00"
			s.Maintenance = v1alpha1.MaintenanceSpec{MaxConcurrent: ptr(2), DeleteEmptyDirData: true, DrainTimeout: &metav1.Duration{Duration: 90 * time.Second}}
		}, ""},
		"fanPeerLostPercent 101": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.FanPeerLostPercent = ptr(101)
		}, "should be less than or equal to 100"},
		"bad safeToPullColor": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.LEDs.SafeToPullColor = "blue"
		}, "safeToPullColor"},
		"maxConcurrent 0": {func(s *v1alpha1.BladeConfigSpec) {
			s.Maintenance.MaxConcurrent = ptr(0)
		}, "should be greater than or equal to 1"},
		"drainTimeout too long": {func(s *v1alpha1.BladeConfigSpec) {
			s.Maintenance.DrainTimeout = &metav1.Duration{Duration: 48 * time.Hour}
		}, "drainTimeout must be between 1s and 24h"},
		"toleration with an invalid effect": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "blades", Effect: "NoScheduleAtAll"}}
		}, "toleration effect must be NoSchedule, PreferNoSchedule or NoExecute"},
		"toleration with an invalid operator": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: "Matches", Value: "blades"}}
		}, "toleration operator must be Exists or Equal"},
		"toleration Exists with a value": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Value: "blades"}}
		}, "a toleration with operator Exists takes no value"},
		"toleration without key and operator": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Tolerations = []corev1.Toleration{{Value: "blades", Effect: corev1.TaintEffectNoSchedule}}
		}, "a toleration without a key must have operator Exists"},
		"tolerationSeconds without NoExecute": {func(s *v1alpha1.BladeConfigSpec) {
			secs := int64(30)
			s.DaemonSet.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: &secs}}
		}, "tolerationSeconds needs effect NoExecute"},
		"valid tolerations": {func(s *v1alpha1.BladeConfigSpec) {
			secs := int64(30)
			s.DaemonSet.Tolerations = []corev1.Toleration{
				{Operator: corev1.TolerationOpExists},
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "blades", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
			}
		}, ""},
		"image with upper case path": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Image = "ghcr.io/KubeBlade/kubeblade:v0.1.0"
		}, "spec.daemonSet.image"},
		"image with a space": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:v0.1.0 latest"
		}, "spec.daemonSet.image"},
		"image with an empty tag": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade:"
		}, "spec.daemonSet.image"},
		"image with a short digest": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Image = "ghcr.io/kubeblade/kubeblade@sha256:abc"
		}, "spec.daemonSet.image"},
		"valid images": {func(s *v1alpha1.BladeConfigSpec) {
			s.DaemonSet.Image = "registry.local:5000/mirror/kubeblade:v0.1.0-rc.1@sha256:" + strings.Repeat("0123456789abcdef", 4)
		}, ""},
		"metrics address without a port": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = "127.0.0.1"
		}, "bindAddress must be host:port"},
		"metrics address port out of range": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = ":65536"
		}, "bindAddress must be host:port"},
		"metrics address a url": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = "http://0.0.0.0:9666"
		}, "bindAddress must be host:port"},
		"metrics address unbracketed ipv6": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = "::1:9666"
		}, "bindAddress must be host:port"},
		"metrics disabled": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = "0"
		}, `metrics.bindAddress cannot be "0" in a BladeConfig`},
		"valid metrics addresses": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = "[::1]:9666"
		}, ""},
		"metrics address loopback": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = "127.0.0.1:9666"
		}, ""},
		"metrics address every interface": {func(s *v1alpha1.BladeConfigSpec) {
			s.Agent.Metrics.BindAddress = ":9100"
		}, ""},
		"too many steps": {func(s *v1alpha1.BladeConfigSpec) {
			for i := 0; i < 17; i++ {
				s.Agent.FanCurve = append(s.Agent.FanCurve, agentconfigv1.FanCurveStep{TemperatureCelsius: int32(i), Percent: 50})
			}
		}, "must have at most 16 items"},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "validation-" + strings.ToLower(strings.ReplaceAll(name, " ", "-"))}}
			tc.mutate(&bc.Spec)
			err := c.Create(ctx(t), bc)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid spec refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestHysteresisAtLeastOne sends hysteresisCelsius as JSON: the typed
// client would drop a 0 (omitempty) and the API server default it to 5.
func TestHysteresisAtLeastOne(t *testing.T) {
	testenv.Need(t)
	for _, tc := range []struct {
		hysteresis int64
		want       string
	}{
		{0, "spec.agent.hysteresisCelsius: Invalid value: 0: spec.agent.hysteresisCelsius in body should be greater than or equal to 1"},
		{-3, "should be greater than or equal to 1"},
		{1, ""},
	} {
		t.Run(fmt.Sprint(tc.hysteresis), func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.GroupVersion.String(), "kind": "BladeConfig",
				"metadata": map[string]any{"name": fmt.Sprintf("hysteresis-%d", tc.hysteresis+10)},
				"spec":     map[string]any{"agent": map[string]any{"hysteresisCelsius": tc.hysteresis}},
			}}
			err := c.Create(ctx(t), u)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("hysteresis %d refused: %v", tc.hysteresis, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCRDDefaultsMatchAgentDefaults(t *testing.T) {
	testenv.Need(t)
	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "defaults-check"}}
	if err := c.Create(ctx(t), bc); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.BladeConfig{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(bc), got); err != nil {
		t.Fatal(err)
	}
	def := config.Default()
	a := got.Spec.Agent
	if got.Spec.Maintenance.MaxConcurrent == nil || *got.Spec.Maintenance.MaxConcurrent != v1alpha1.DefaultMaintenanceMaxConcurrent {
		t.Errorf("API server defaults maintenance.maxConcurrent to %v, want %d", got.Spec.Maintenance.MaxConcurrent, v1alpha1.DefaultMaintenanceMaxConcurrent)
	}
	if a.FanPeerLostPercent == nil || def.FanPeerLostPercent == nil || *a.FanPeerLostPercent != *def.FanPeerLostPercent {
		t.Errorf("API server defaults fanPeerLostPercent to %v; the agent's default is %v", a.FanPeerLostPercent, def.FanPeerLostPercent)
	}
	if a.CriticalCelsius != def.CriticalCelsius || a.HysteresisCelsius != def.HysteresisCelsius || a.Hardware.Backend != def.Hardware.Backend {
		t.Fatalf("API server defaults critical=%d hysteresis=%d backend=%q; the agent's are %d, %d, %q",
			a.CriticalCelsius, a.HysteresisCelsius, a.Hardware.Backend, def.CriticalCelsius, def.HysteresisCelsius, def.Hardware.Backend)
	}
}

func TestBladeStatusSubresourceAndColumns(t *testing.T) {
	testenv.Need(t)
	b := &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: "blade-columns"}}
	if err := c.Create(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	temp := int32(52)
	b.Status = v1alpha1.BladeStatus{NodeName: "blade-columns", State: v1alpha1.BladeStateIdle, TemperatureCelsius: &temp,
		Fan: v1alpha1.BladeFanStatus{Percent: 60, Mode: "auto"}}
	if err := c.Status().Update(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.Blade{}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(b), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.State != v1alpha1.BladeStateIdle || *got.Status.TemperatureCelsius != 52 {
		t.Fatalf("status = %+v", got.Status)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx(t), client.ObjectKey{Name: "blades.kubeblade.io"}, crd); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if col.Priority == 0 {
			cols = append(cols, col.Name)
		}
	}
	if diff := cmp.Diff([]string{"Node", "Temp", "Fan", "Power", "State", "Config", "Age"}, cols); diff != "" {
		t.Errorf("kubectl get blades columns (-want +got):\n%s", diff)
	}
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("Blade scope = %s", crd.Spec.Scope)
	}
}

func ptr(v int32) *int32 { return &v }

// TestBladeConfigDevicePathsAgreeWithTheAgent: every path-like field of a
// BladeConfig admits only the shapes the blade's hardware has, and the
// agent (config.FromSpec, which applies a BladeConfig) refuses exactly
// what the API server refuses, so a BladeConfig stored before the schema
// tightened, or a config file, cannot reach what the API refuses.
func TestBladeConfigDevicePathsAgreeWithTheAgent(t *testing.T) {
	testenv.Need(t)
	hostFiles := []string{
		"/proc/sysrq-trigger", "/dev/mmcblk0", "/var/lib/kubeblade/ca.key", "../../etc/shadow", "/dev/../proc/sysrq-trigger",
		"/dev/mem", "mem", "/tmp/leds0", "leds0/../../etc/shadow", "/dev/pts/0", "ttyAMA", "leds", "leds1234", ".", "..",
		"/run/kubeblade/agent.sock", "/var/lib/kubeblade/agent.sock", "/run/kubeblade/../../dev/x.sock", "agent.sock", "../agent.sock",
		"leds0", "/dev/leds0", "/dev/leds12", "ttyAMA5", "/dev/ttyAMA4", "ttyS0", "pwmchip0", "1f00098000.pwm", "blade:rgb:top",
		"127.0.0.1:9666", ":9666", "[::1]:9666", "169.254.169.254:80", "[fe80::1]:9666", "metadata.google.internal:80", "10.0.0.5:9100",
	}
	fields := map[string]func(*agentconfigv1.AgentConfig, string){
		"hardware.linux.leds.stream":  func(a *agentconfigv1.AgentConfig, v string) { a.Hardware.Linux.LEDs.Stream = v },
		"hardware.linux.leds.top":     func(a *agentconfigv1.AgentConfig, v string) { a.Hardware.Linux.LEDs.Top = v },
		"hardware.linux.leds.edge":    func(a *agentconfigv1.AgentConfig, v string) { a.Hardware.Linux.LEDs.Edge = v },
		"hardware.linux.serialDevice": func(a *agentconfigv1.AgentConfig, v string) { a.Hardware.Linux.SerialDevice = v },
		"hardware.linux.pwmChip":      func(a *agentconfigv1.AgentConfig, v string) { a.Hardware.Linux.PWMChip = v },
		"grpc.socketPath":             func(a *agentconfigv1.AgentConfig, v string) { a.GRPC.SocketPath = v },
		"metrics.bindAddress":         func(a *agentconfigv1.AgentConfig, v string) { a.Metrics.BindAddress = v },
	}
	n := 0
	for field, set := range fields {
		t.Run(field, func(t *testing.T) {
			accepted := 0
			for _, v := range hostFiles {
				n++
				bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("paths-%d", n)}}
				set(&bc.Spec.Agent, v)
				apiErr := c.Create(ctx(t), bc, client.DryRunAll)
				_, agentErr := config.FromSpec(bc.Spec.Agent, nil)
				if (apiErr == nil) != (agentErr == nil) {
					t.Errorf("%s=%q: the API server says %v, the agent %v", field, v, apiErr, agentErr)
				}
				if apiErr == nil {
					accepted++
				}
			}
			if accepted == 0 || accepted == len(hostFiles) {
				t.Errorf("%s: %d of %d values accepted; the list must hold both kinds", field, accepted, len(hostFiles))
			}
		})
	}
	for _, attack := range []struct{ field, value string }{
		{"hardware.linux.leds.stream", "/proc/sysrq-trigger"},
		{"hardware.linux.leds.stream", "/dev/mmcblk0"},
		{"hardware.linux.leds.stream", "/var/lib/kubeblade/ca.key"},
		{"hardware.linux.serialDevice", "../../etc/shadow"},
		{"hardware.linux.pwmChip", "../../../dev/mem"},
		{"grpc.socketPath", "/var/lib/kubeblade/ca.key"},
		{"metrics.bindAddress", "169.254.169.254:80"},
	} {
		bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "paths-attack"}}
		fields[attack.field](&bc.Spec.Agent, attack.value)
		if err := c.Create(ctx(t), bc, client.DryRunAll); err == nil {
			t.Errorf("%s=%s accepted", attack.field, attack.value)
		}
	}
}

// TestBladeConfigHasNoRoots: sysfsRoot, devRoot, procRoot and the
// simulator's controlSocket are not in the BladeConfig API: a strict
// client is told so, and otherwise the API server drops them, so no
// agent ever reads them from a BladeConfig.
func TestBladeConfigHasNoRoots(t *testing.T) {
	testenv.Need(t)
	for i, removed := range []map[string]any{
		{"linux": map[string]any{"sysfsRoot": "/tmp"}},
		{"linux": map[string]any{"devRoot": "/proc"}},
		{"linux": map[string]any{"procRoot": "/var/lib/kubeblade"}},
		{"simulated": map[string]any{"controlSocket": "/etc/shadow"}},
	} {
		name := fmt.Sprintf("roots-%d", i)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "BladeConfig",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"agent": map[string]any{"hardware": removed}},
		}}
		err := c.Create(ctx(t), u.DeepCopy(), client.FieldValidation("Strict"))
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%v with strict field validation: %v, want unknown field", removed, err)
		}
		if err := c.Create(ctx(t), u.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(ctx(t), client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		hw, _, _ := unstructured.NestedMap(got.Object, "spec", "agent", "hardware")
		for k, v := range removed {
			if m, _ := hw[k].(map[string]any); len(m) > 0 {
				t.Errorf("stored %s: %v (from %v)", k, m, v)
			}
		}
	}
}
