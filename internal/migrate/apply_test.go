package migrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/agentd"
	"github.com/kubeblade/kubeblade/internal/clientconfig"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/migrate"
	"github.com/kubeblade/kubeblade/internal/testenv"
)

// One control plane for the package, started by the first test that
// needs it and stopped when the tests end; c is its client.
var (
	apiServer = testenv.NewSuite(testenv.Options{CRDDirs: []string{"config/crd/bases"}}, func(_ context.Context, e *testenv.Env) error {
		s := runtime.NewScheme()
		if err := v1alpha1.AddToScheme(s); err != nil {
			return err
		}
		var err error
		c, err = client.New(e.Config, client.Options{Scheme: s})
		return err
	})
	c client.Client
)

func TestMain(m *testing.M) { os.Exit(apiServer.Run(m)) }

func kubeClient(t *testing.T) client.Client {
	t.Helper()
	apiServer.Need(t)
	return c
}

func oldSamples(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "agent", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		if strings.Contains(f, ".out.") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = raw
	}
	if len(out) < 4 {
		t.Fatalf("only %d samples", len(out))
	}
	return out
}

// TestBladeConfigsApply creates every sample's BladeConfig on a real API
// server, which checks the CRD's OpenAPI schema and CEL rules, strictly
// (an unknown field fails); what the server stores is what the agents run.
func TestBladeConfigsApply(t *testing.T) {
	c := kubeClient(t)
	for path, raw := range oldSamples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			res, err := migrate.TranslateAgentConfig(raw, path, migrate.TargetBladeConfig, migrate.TranslateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := res.BladeConfigYAML(path, "migrated-"+name)
			if err != nil {
				t.Fatal(err)
			}
			var bc v1alpha1.BladeConfig
			if err := sigsyaml.UnmarshalStrict(out, &bc); err != nil {
				t.Fatalf("the BladeConfig does not decode strictly: %v\n%s", err, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Create(ctx, &bc, client.FieldValidation("Strict")); err != nil {
				t.Fatalf("the API server refuses it: %v\n%s", err, out)
			}
			var stored v1alpha1.BladeConfig
			if err := c.Get(ctx, client.ObjectKeyFromObject(&bc), &stored); err != nil {
				t.Fatal(err)
			}
			// The agents apply spec.agent through config.Parse.
			js, err := json.Marshal(stored.Spec.Agent)
			if err != nil {
				t.Fatal(err)
			}
			applied, err := config.Parse(js)
			if err != nil {
				t.Fatalf("the agents would refuse the stored spec.agent: %v", err)
			}
			if diff := cmp.Diff(res.Config, applied); diff != "" {
				t.Errorf("stored config differs from the translation (-translated +stored):\n%s", diff)
			}
		})
	}
}

// TestAgentRunsTranslation starts a real agent (agentd, simulated
// hardware) on every sample's agent.yaml and reads back over gRPC the
// settings it runs with. The environment moves the host paths into the
// test: the same KUBEBLADE_ overrides an operator would use.
func TestAgentRunsTranslation(t *testing.T) {
	for path, raw := range oldSamples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			res, err := migrate.TranslateAgentConfig(raw, path, migrate.TargetAgentFile, migrate.TranslateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := res.AgentYAML(path)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "agent.yaml")
			if err := os.WriteFile(cfgPath, out, 0o644); err != nil {
				t.Fatal(err)
			}
			socket := filepath.Join(dir, "agent.sock")
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			started := make(chan *agentd.Daemon, 1)
			go func() {
				errc <- agentd.Run(ctx, agentd.Options{
					ConfigPath: cfgPath, StateDir: filepath.Join(dir, "state"), RemoteAddress: "127.0.0.1:0",
					Environ: []string{"KUBEBLADE_HARDWARE_BACKEND=simulated", "KUBEBLADE_GRPC_SOCKET_PATH=" + socket, "KUBEBLADE_METRICS_BIND_ADDRESS=0"},
					Started: func(d *agentd.Daemon) { started <- d },
				})
			}()
			select {
			case <-started:
			case err := <-errc:
				cancel()
				t.Fatalf("the agent does not start with the translation: %v\n%s", err, out)
			case <-time.After(60 * time.Second):
				cancel()
				t.Fatal("agent did not start")
			}
			defer func() {
				cancel()
				if err := <-errc; err != nil {
					t.Errorf("agent: %v", err)
				}
			}()
			conn, err := clientconfig.Blade{Server: "unix://" + socket}.Dial("")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
			defer ccancel()
			r, err := agentv1.NewAgentServiceClient(conn).GetStatus(cctx, &agentv1.GetStatusRequest{}, grpc.WaitForReady(true))
			if err != nil {
				t.Fatal(err)
			}
			st := r.GetStatus()
			want := res.Config
			type step struct{ Celsius, Percent int32 }
			var curve, wantCurve []step
			for _, s := range st.GetFanCurve() {
				curve = append(curve, step{int32(s.GetTemperatureCelsius()), int32(s.GetPercent())})
			}
			for _, s := range want.FanCurve {
				wantCurve = append(wantCurve, step{s.TemperatureCelsius, s.Percent})
			}
			if diff := cmp.Diff(wantCurve, curve); diff != "" {
				t.Errorf("fan curve (-translated +running):\n%s", diff)
			}
			if st.GetCriticalCelsius() != float64(want.CriticalCelsius) || st.GetStealthRequested() != want.Stealth {
				t.Errorf("running critical %v stealth %v, translated %d %v", st.GetCriticalCelsius(), st.GetStealthRequested(), want.CriticalCelsius, want.Stealth)
			}
			if !want.Stealth {
				for _, l := range st.GetLeds() {
					c := l.GetColor()
					if got := fmt.Sprintf("#%02x%02x%02x", c.GetRed(), c.GetGreen(), c.GetBlue()); l.GetLed() == agentv1.LED_LED_EDGE && got != want.LEDs.IdleColor {
						t.Errorf("edge LED shows %s, translated idle colour %s", got, want.LEDs.IdleColor)
					}
				}
			}
		})
	}
}
