package kubeagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentconfigv1 "github.com/kubeblade/kubeblade/api/agentconfig/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/hardware/simulated"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// bladeRequests records the agent's requests to Blades and can refuse its
// BladeConfig lists, for the start-up tests.
type bladeRequests struct {
	rt           http.RoundTripper
	refuseConfig bool

	mu     sync.Mutex
	status []string // bodies of the Blade status writes, in order
}

func (b *bladeRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.refuseConfig && strings.Contains(req.URL.Path, "/bladeconfigs") {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("refused by the test")), Request: req}, nil
	}
	if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") && strings.Contains(req.URL.Path, "/blades/") {
		data, err := requestBody(req)
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		b.status = append(b.status, data)
		b.mu.Unlock()
	}
	return b.rt.RoundTrip(req)
}

// requestBody reads a request's body without consuming it.
func requestBody(req *http.Request) (string, error) {
	body, err := req.GetBody()
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(body)
	return string(data), err
}

func (b *bladeRequests) statusWrites() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.status...)
}

func (b *bladeRequests) wrap(ro *Options) {
	ro.Config = rest.CopyConfig(ro.Config)
	ro.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { b.rt = rt; return b })
}

// labelledNode creates the Node of an agent about to start, already
// assigned to BladeConfig config, as the operator leaves it.
func labelledNode(t *testing.T, name, config string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/arch": "arm64", v1alpha1.LabelConfig: config,
	}}}
	if err := need(t).k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// configuredNode creates BladeConfig name and the Node name assigned to it.
func configuredNode(t *testing.T, name string) {
	t.Helper()
	bc := &v1alpha1.BladeConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := need(t).k8s.Create(context.Background(), bc); err != nil {
		t.Fatal(err)
	}
	labelledNode(t, name, name)
}

// An agent that starts on a Node assigned to a BladeConfig writes its
// Blade status once, with that config in it, not first without it and
// again a moment later (two status writes per blade per start, a
// thousand extra writes when a rack starts at once).
func TestFirstStatusCarriesTheAssignedConfig(t *testing.T) {
	configuredNode(t, "first-status")
	rec := &bladeRequests{}
	b := startBlade(t, "first-status", func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) { rec.wrap(ro) })
	testwait.Eventually(t, waitTimeout, "Blade reports the config", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil || bl.Status.Config == nil {
			return false, fmt.Sprint(err)
		}
		return bl.Status.Config.Name == "first-status" && bl.Status.Config.Generation == 1, fmt.Sprintf("%+v", bl.Status.Config)
	})
	// The start-up Events are the last of the start-up writes.
	b.waitEvent("ConfigApplied")
	writes := rec.statusWrites()
	if len(writes) != 1 {
		t.Fatalf("%d Blade status writes at start, want 1:\n%s", len(writes), strings.Join(writes, "\n"))
	}
	if !strings.Contains(writes[0], `"config":{"name":"first-status","generation":1}`) {
		t.Errorf("the first status write lacks the config: %s", writes[0])
	}
}

// When the assigned BladeConfig cannot be read, the Blade status does not
// wait for it for ever: after Options.ConfigGrace it is written with the
// local config, and the Blade exists from the start.
func TestFirstStatusWaitsForTheConfigOnlySoLong(t *testing.T) {
	labelledNode(t, "config-refused", "never-readable")
	rec := &bladeRequests{refuseConfig: true}
	b := startBlade(t, "config-refused", func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		rec.wrap(ro)
		ro.ConfigGrace = 300 * time.Millisecond
	})
	testwait.Eventually(t, waitTimeout, "Blade created", func(context.Context) (bool, string) {
		_, err := b.getBlade()
		return err == nil, fmt.Sprint(err)
	})
	testwait.Eventually(t, waitTimeout, "status written after the grace", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		return bl.Status.State != "", fmt.Sprintf("%+v", bl.Status)
	})
	bl, _ := b.getBlade()
	if bl.Status.Config != nil {
		t.Errorf("status reports config %+v, which was never read", bl.Status.Config)
	}
	if since := b.rep.Stats().BladeCreated; since.IsZero() {
		t.Error("Stats().BladeCreated is zero after the Blade was created")
	}
}

// fakeLister records what the named watch asks the API server for.
type fakeLister struct {
	mu      sync.Mutex
	lists   []metav1.ListOptions
	watches []metav1.ListOptions
	w       *watch.FakeWatcher
}

func (f *fakeLister) List(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, o)
	return &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "7"}}}}, nil
}

func (f *fakeLister) Watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches = append(f.watches, o)
	return f.w, nil
}

// The agent's named watches list first (resourceVersion 0: the API
// server's cache as it stands) and watch from there, instead of
// client-go's streaming list, whose consistent initial state waits for the
// watch cache to catch up with etcd: seconds, when a rack starts at once.
func TestNamedWatchListsThenWatches(t *testing.T) {
	f := &fakeLister{w: watch.NewFake()}
	w := newObjectWatch[*corev1.NodeList](context.Background(), f, &corev1.Node{}, "n", nil, nil)
	defer w.stop()
	select {
	case <-w.changed:
	case <-time.After(waitTimeout):
		t.Fatal("the watch never delivered the listed Node")
	}
	if n, ok := w.get().(*corev1.Node); !ok || n.Name != "n" {
		t.Fatalf("get() = %v, want the listed Node", w.get())
	}
	testwait.Eventually(t, waitTimeout, "a watch after the list", func(context.Context) (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.watches) > 0, ""
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lists) != 1 {
		t.Fatalf("%d lists, want 1 (a streaming list would be a watch)", len(f.lists))
	}
	if l := f.lists[0]; l.ResourceVersion != "0" || l.FieldSelector != "metadata.name=n" {
		t.Errorf("list options = %+v, want resourceVersion 0 and the name selector", l)
	}
	for _, o := range f.watches {
		if o.SendInitialEvents != nil && *o.SendInitialEvents {
			t.Errorf("watch asked for initial events: %+v", o)
		}
		// As long as the API server's default for a watch (30 to 60
		// min), not client-go's 5 to 10: each renewal is a request.
		if o.TimeoutSeconds == nil || *o.TimeoutSeconds < 1800 || *o.TimeoutSeconds > 3600 {
			t.Errorf("watch timeout = %v s, want 1800 to 3600", o.TimeoutSeconds)
		}
	}
}

// A Node assigned to a BladeConfig the agent must refuse (here every
// config is made invalid by a bad KUBEBLADE_ override, which the agent lays
// over each one) still gets its Blade status at start, with the local
// config, and one InvalidConfig Event, not one per sync.
func TestRefusedConfigAtStartIsReportedOnce(t *testing.T) {
	configuredNode(t, "refused-at-start")
	refusals := &countingHandler{msg: "BladeConfig refused; keeping the running config"}
	b := startBlade(t, "refused-at-start", func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		ro.Environ = []string{"KUBEBLADE_LEDS_IDLE_COLOR=not-a-colour"}
		ro.Logger = slog.New(refusals)
		ro.Heartbeat = 200 * time.Millisecond // many syncs while the test watches
	})
	b.waitEvent("InvalidConfig")
	testwait.Eventually(t, waitTimeout, "status written with the local config", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil {
			return false, err.Error()
		}
		return bl.Status.State != "" && bl.Status.Config == nil, fmt.Sprintf("%+v", bl.Status.Config)
	})
	// Several heartbeats later (each a sync) there is still one Event, not
	// a series: the refused generation is not tried again.
	first := b.rep.Stats().Writes
	testwait.Eventually(t, waitTimeout, "three more heartbeats", func(context.Context) (bool, string) {
		w := b.rep.Stats().Writes
		return w >= first+3, fmt.Sprintf("%d writes since", w-first)
	})
	evs := b.events("InvalidConfig")
	if len(evs) != 1 || evs[0].DeprecatedCount > 1 || (evs[0].Series != nil && evs[0].Series.Count > 1) {
		t.Errorf("InvalidConfig Events = %+v, want one, reported once", evs)
	}
	if n := refusals.n.Load(); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}
}

// countingHandler counts the log records with message msg.
type countingHandler struct {
	msg string
	n   atomic.Int64
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *countingHandler) WithGroup(string) slog.Handler { return h }

// apiRequests records the verb of each request to Nodes and BladeConfigs
// ("list nodes", "watch bladeconfigs", ...), for the start-up count.
type apiRequests struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (a *apiRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	for _, res := range []string{"nodes", "bladeconfigs"} {
		if !strings.Contains(req.URL.Path, "/"+res) {
			continue
		}
		verb := strings.ToLower(req.Method)
		switch {
		case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/"+res):
			verb = "list"
		}
		a.mu.Lock()
		a.seen = append(a.seen, verb+" "+res)
		a.mu.Unlock()
	}
	return a.rt.RoundTrip(req)
}

func (a *apiRequests) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func (a *apiRequests) count(what string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := 0
	for _, s := range a.seen {
		if s == what {
			c++
		}
	}
	return c
}

// The agent's first read of its Node and BladeConfig (ReadInitial, before
// the hardware opens) is where its watches start: the Reporter lists
// neither again, and a change made between that read and the watches is
// still applied, because they watch from the read's resourceVersion.
func TestWatchesStartFromTheInitialRead(t *testing.T) {
	configuredNode(t, "initial-read")
	c := need(t)
	ctx := context.Background()
	var in *Initial
	rec := &apiRequests{}
	b := startBlade(t, "initial-read", func(_ *simulated.Options, _ *agentconfigv1.AgentConfig, ro *Options) {
		var err error
		if in, err = ReadInitial(ctx, ro.Config, "initial-read"); err != nil {
			t.Fatal(err)
		}
		if in.NodeObject() == nil || in.ConfigName != "initial-read" || in.ConfigObject() == nil || in.ConfigObject().Generation != 1 {
			t.Fatalf("ReadInitial = %+v, want the Node and BladeConfig initial-read generation 1", in)
		}
		// Changed after the agent's first read, before its watches.
		bc := &v1alpha1.BladeConfig{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: "initial-read"}, bc); err != nil {
			t.Fatal(err)
		}
		bc.Spec.Agent.LEDs.IdleColor = "#0000ff"
		if err := c.k8s.Update(ctx, bc); err != nil {
			t.Fatal(err)
		}
		ro.Initial = in
		ro.Config = rest.CopyConfig(ro.Config)
		ro.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec })
	})
	testwait.Eventually(t, waitTimeout, "Blade reports generation 2, changed after the first read", func(context.Context) (bool, string) {
		bl, err := b.getBlade()
		if err != nil || bl.Status.Config == nil {
			return false, fmt.Sprint(err)
		}
		return bl.Status.Config.Name == "initial-read" && bl.Status.Config.Generation == 2, fmt.Sprintf("%+v", bl.Status.Config)
	})
	for _, what := range []string{"list nodes", "list bladeconfigs", "get nodes", "get bladeconfigs"} {
		if n := rec.count(what); n != 0 {
			t.Errorf("the reporter made %d %s requests after the first read, want 0 (requests: %v)", n, what, rec.all())
		}
	}
	for _, what := range []string{"watch nodes", "watch bladeconfigs"} {
		if n := rec.count(what); n != 1 {
			t.Errorf("the reporter made %d %s requests, want 1 (requests: %v)", n, what, rec.all())
		}
	}
}
