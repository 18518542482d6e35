package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "validation-" + strings.ReplaceAll(name, " ", "-")}}
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

func TestCRDDefaultsMatchAgentDefaults(t *testing.T) {
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
