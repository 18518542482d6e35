package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent's footprint targets (docs/performance.md) rest on what it links,
// so a new import that drags in a heavy dependency fails here, not in a
// benchmark someone has to remember to run.
func TestLinkedPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cases := []struct {
		name   string
		tags   string
		banned []string
	}{
		// html/template (via grpc-go's x/net/trace) makes the linker keep
		// every exported method of every reachable type.
		// client-go's all-groups scheme (imported by its clientset, typed
		// clients, events recorder and CSR helper, and by controller-runtime's
		// client) links every built-in API type; internal/kubeclient exists
		// so the agent needs none of them.
		{"release", "grpcnotrace", []string{
			"golang.org/x/net/trace", "html/template", "text/template",
			"k8s.io/client-go/kubernetes", "k8s.io/client-go/tools/events", "k8s.io/client-go/util/certificate",
			"sigs.k8s.io/controller-runtime/pkg/client",
		}},
		// The lean standalone build (make build-standalone) links no
		// Kubernetes client or API machinery at all.
		{"standalone", "nokube,grpcnotrace", []string{
			"golang.org/x/net/trace", "html/template",
			"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/", "sigs.k8s.io/controller-runtime",
			"github.com/kubeblade/kubeblade/api/v1alpha1",
		}},
	}
	// The rack view lives in bladectl only (docs/dashboard.md: the agent build does
	// not grow with it): neither it, its embedded page nor the browser
	// driver its tests use may reach any agent build.
	for i := range cases {
		cases[i].banned = append(cases[i].banned,
			"github.com/kubeblade/kubeblade/internal/dashboard", "github.com/kubeblade/kubeblade/internal/testbrowser",
			"github.com/chromedp/")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-tags", c.tags, "-deps", ".").CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 50 {
				t.Fatalf("go list returned only %d packages: %s", len(deps), out)
			}
			for _, d := range deps {
				for _, b := range c.banned {
					if d == b || strings.HasPrefix(d, b) && (strings.HasSuffix(b, "/") || strings.HasPrefix(d, b+"/")) {
						t.Errorf("-tags %s links %s", c.tags, d)
					}
				}
			}
		})
	}
}
