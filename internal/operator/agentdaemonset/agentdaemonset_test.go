package agentdaemonset

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/config"
)

// Only start-only agent settings and spec.daemonSet may change the
// DaemonSet: everything else the agents apply live, without a restart.
func TestBuildChangesOnlyForStartOnlySettings(t *testing.T) {
	base := &kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "u"}}
	d := DefaultDefaults()
	d.Image = "img"
	for name, tc := range map[string]struct {
		change func(*kbv1.BladeConfig)
		rolls  bool
	}{
		"critical temperature": {func(bc *kbv1.BladeConfig) { bc.Spec.Agent.CriticalCelsius = 70 }, false},
		"stealth":              {func(bc *kbv1.BladeConfig) { bc.Spec.Agent.Stealth = true }, false},
		"priority":             {func(bc *kbv1.BladeConfig) { bc.Spec.Priority = 9 }, false},
		"metrics address":      {func(bc *kbv1.BladeConfig) { bc.Spec.Agent.Metrics.BindAddress = ":9777" }, true},
		"hardware backend":     {func(bc *kbv1.BladeConfig) { bc.Spec.Agent.Hardware.Backend = "simulated" }, true},
		"gRPC socket path": {func(bc *kbv1.BladeConfig) {
			bc.Spec.Agent.GRPC = agentconfigv1.GRPCConfig{SocketPath: "/run/other.sock"}
		}, true},
		"image": {func(bc *kbv1.BladeConfig) { bc.Spec.DaemonSet.Image = "other" }, true},
	} {
		t.Run(name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.change(changed)
			same := equality.Semantic.DeepEqual(Build(base, d), Build(changed, d))
			if same == tc.rolls {
				t.Errorf("DaemonSet changed: %v, want %v", !same, tc.rolls)
			}
		})
	}
}

func TestNames(t *testing.T) {
	if got := Name("gold"); got != "kubeblade-agent-gold" {
		t.Errorf("Name = %q", got)
	}
	ds := Build(&kbv1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: "gold"}}, DefaultDefaults())
	for k, v := range SelectorLabels("gold") {
		if ds.Labels[k] != v || ds.Spec.Template.Labels[k] != v || ds.Spec.Selector.MatchLabels[k] != v {
			t.Errorf("label %s=%s missing from the DaemonSet, its pods or its selector", k, v)
		}
	}
	if ds.Labels[LabelManagedBy] != ManagedBy {
		t.Errorf("managed-by %q: the uninstall command finds agent DaemonSets by it", ds.Labels[LabelManagedBy])
	}
}

// The hash must not change between operator versions for the same
// settings, or an upgrade of the operator would restart every agent.
func TestStartupConfigHashIsStable(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  agentconfigv1.AgentConfig
		want string
	}{
		"empty":              {agentconfigv1.AgentConfig{}, "0667bacae55c26c1"},
		"the agent defaults": {config.Default(), "11bb259022eec025"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := StartupConfigHash(tc.cfg); got != tc.want {
				t.Errorf("StartupConfigHash = %s, want %s (as before)", got, tc.want)
			}
		})
	}
}
