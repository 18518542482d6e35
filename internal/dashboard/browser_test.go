package dashboard_test

// Browser tests: `bladectl dashboard` (the real command) against a real
// kube-apiserver and etcd (envtest) holding simulated blades' Nodes and
// Blades, and the page in headless Chromium driven by chromedp. They skip
// with the reason in a plain `go test` when Chromium or the control-plane
// binaries are missing, and fail under `make test`.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/bladectl"
	"github.com/kubeblade/kubeblade/internal/config"
	"github.com/kubeblade/kubeblade/internal/dashboard"
	"github.com/kubeblade/kubeblade/internal/localcluster"
	"github.com/kubeblade/kubeblade/internal/testbrowser"
	"github.com/kubeblade/kubeblade/internal/testenv"
	"github.com/kubeblade/kubeblade/internal/testreq"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

var screenshotPath = flag.String("screenshot", "", "where TestBrowserScreenshot writes the page's screenshot (docs/dashboard.png)")

// The screenshot's viewport: a laptop screen, where the demo's three
// blades fill enough of the page to be read in the docs.
const shotWidth, shotHeight = 1280, 720

// live bounds a wait for the page to show a change, only so a broken run
// ends: how soon a change shows is the hub's one flush interval on its
// clock (TestRunFlushesAChangeAtTheNextInterval) after the watch delivers
// it, and this test logs the figure it saw. A wall-clock bound here would
// measure the machine's load, not the page.
const live = 30 * time.Second

// The suite's control plane and browser start with the first test that
// needs them (the unit tests beside them do not wait) and stop in TestMain.
var (
	cluster = testenv.NewSuite(testenv.Options{CRDDirs: []string{"config/crd/bases"}, Restartable: true}, startCluster)
	suite   struct {
		// Set up by startCluster.
		env        *testenv.Env
		admin      client.Client
		adminREST  *rest.Config
		kubeconfig string // contexts "admin" (current) and "viewer" (no RBAC)

		browserOnce sync.Once
		browser     *testbrowser.Browser
		browserErr  error
	}
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if suite.browser != nil {
		suite.browser.Stop()
	}
	cluster.Stop()
	os.Exit(code)
}

func needCluster(t *testing.T) {
	t.Helper()
	cluster.Need(t) // skips, or fails under make test, without a control plane
}

// startCluster adds the users the tests act as and writes a kubeconfig for
// them; the directory goes when the suite's context ends.
func startCluster(ctx context.Context, env *testenv.Env) error {
	suite.env = env
	admin, err := env.Environment().AddUser(envtest.User{Name: "rack-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	viewer, err := env.Environment().AddUser(envtest.User{Name: "viewer"}, nil)
	if err != nil {
		return err
	}
	suite.adminREST = admin.Config()
	if suite.admin, err = client.New(admin.Config(), client.Options{Scheme: dashboard.Scheme()}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dashboard-test")
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { _ = os.RemoveAll(dir) })
	suite.kubeconfig = filepath.Join(dir, "kubeconfig")
	return testenv.WriteKubeconfig(suite.kubeconfig, "admin", map[string]*rest.Config{"admin": admin.Config(), "viewer": viewer.Config()})
}

func needBrowser(t *testing.T) context.Context {
	t.Helper()
	suite.browserOnce.Do(func() {
		suite.browser, suite.browserErr = testbrowser.Start(context.Background())
	})
	if errors.Is(suite.browserErr, testbrowser.ErrNotFound) {
		testreq.Unavailable(t, "%v", suite.browserErr)
	}
	if suite.browserErr != nil {
		t.Fatalf("starting Chromium: %v", suite.browserErr)
	}
	return suite.browser.Ctx
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ---- the cluster's side: simulated blades ------------------------------

// rackBlade is one blade to create: its Node and, unless noAgent, its Blade.
type rackBlade struct {
	name, chassis, slot string
	annotations         map[string]string
	status              v1alpha1.BladeStatus
	noAgent             bool
	unschedulable       bool // cordoned
}

func i32(v int32) *int32 { return &v }

// idle is what a simulated blade's agent reports when all is well, with
// the agent's default colours (internal/config).
func idle(temp int32) v1alpha1.BladeStatus {
	return v1alpha1.BladeStatus{
		State: v1alpha1.BladeStateIdle, SoC: "simulated", FanUnit: "standard", PowerSource: "poe-802.3at",
		TemperatureCelsius: i32(temp), Fan: v1alpha1.BladeFanStatus{Percent: 35, RPM: i32(2730), Mode: "auto"},
		LEDs: v1alpha1.BladeLEDsStatus{
			Top:  v1alpha1.LEDStatus{Color: "#000000", Pattern: "off"},
			Edge: v1alpha1.LEDStatus{Color: "#001000", Pattern: "steady"},
		},
		Capabilities: []string{"fan", "leds", "tach", "button", "poe"}, HardwareBackend: "simulated", AgentVersion: "v0.5.0",
		Config:        &v1alpha1.AppliedConfig{Name: "default", Generation: 2},
		Conditions:    []metav1.Condition{{Type: v1alpha1.BladeConditionAgentReady, Status: metav1.ConditionTrue, Reason: "Running", LastTransitionTime: metav1.Now()}},
		HeartbeatTime: &metav1.Time{Time: time.Now()},
	}
}

func createRack(t *testing.T, blades ...rackBlade) {
	t.Helper()
	ctx := ctxT(t)
	for _, b := range blades {
		labels := map[string]string{v1alpha1.LabelBlade: "true", v1alpha1.LabelConfig: "default"}
		if b.chassis != "" {
			labels[dashboard.LabelChassis] = b.chassis
		}
		if b.slot != "" {
			labels[dashboard.LabelSlot] = b.slot
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b.name, Labels: labels, Annotations: b.annotations},
			Spec: corev1.NodeSpec{Unschedulable: b.unschedulable}}
		if err := suite.admin.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = suite.admin.Delete(context.Background(), n) })
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
		if err := suite.admin.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		if b.noAgent {
			continue
		}
		bl := &v1alpha1.Blade{ObjectMeta: metav1.ObjectMeta{Name: b.name}}
		if err := suite.admin.Create(ctx, bl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = suite.admin.Delete(context.Background(), bl) })
		bl.Status = b.status
		bl.Status.NodeName = b.name
		if err := suite.admin.Status().Update(ctx, bl); err != nil {
			t.Fatal(err)
		}
	}
}

// setStatus changes a Blade's status as its agent would.
func setStatus(t *testing.T, name string, change func(*v1alpha1.BladeStatus)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &v1alpha1.Blade{}
		if err := suite.admin.Get(ctxT(t), client.ObjectKey{Name: name}, b); err != nil {
			return err
		}
		change(&b.Status)
		return suite.admin.Status().Update(ctxT(t), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func nodeEvent(t *testing.T, node, reason, note, typ string, at time.Time) {
	t.Helper()
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: node + "-", Namespace: dashboard.EventsNamespace},
		EventTime:  metav1.MicroTime{Time: at}, Reason: reason, Note: note, Type: typ, Action: reason,
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: node, APIVersion: "v1"},
		ReportingController: "kubeblade.io/agent", ReportingInstance: node,
	}
	if err := suite.admin.Create(ctxT(t), e); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.admin.Delete(context.Background(), e) })
}

// ---- the dashboard: bladectl dashboard in this process ------------------

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type dash struct {
	url         string
	stdout, err *syncBuffer
	cancel      context.CancelFunc
	done        chan int
	stopOnce    sync.Once
	code        int
}

var urlRe = regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)

// startDashboard runs `bladectl dashboard --listen LISTEN ARGS...` until
// the test ends (or stop).
func startDashboard(t *testing.T, listen string, args ...string) *dash {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &dash{stdout: &syncBuffer{}, err: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		d.done <- bladectl.Main(ctx, append([]string{"dashboard", "--listen", listen}, args...), bladectl.Env{
			Stdout: d.stdout, Stderr: d.err, Argv0: "bladectl",
			Getenv: func(v string) string {
				if v == "KUBECONFIG" {
					return suite.kubeconfig
				}
				return ""
			},
		})
	}()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("bladectl dashboard wrote:\n%s%s", d.stdout, d.err)
		}
	})
	testwait.Eventually(t, 30*time.Second, "bladectl dashboard to print its address", func(context.Context) (bool, string) {
		select {
		case code := <-d.done:
			d.done <- code
			t.Fatalf("bladectl dashboard exited %d: %s%s", code, d.stdout, d.err)
		default:
		}
		d.url = urlRe.FindString(d.stdout.String())
		return d.url != "", d.stdout.String() + d.err.String()
	})
	return d
}

func (d *dash) stop(t *testing.T) {
	d.stopOnce.Do(func() {
		d.cancel()
		select {
		case d.code = <-d.done:
		case <-time.After(30 * time.Second):
			t.Error("bladectl dashboard did not stop within 30 s of its context ending")
		}
		for _, s := range []string{"goroutine ", "panic", "StatusError"} {
			if strings.Contains(d.err.String(), s) {
				t.Errorf("raw error on the command line:\n%s", d.err)
			}
		}
	})
}

func (d *dash) listen() string { return strings.TrimSuffix(strings.TrimPrefix(d.url, "http://"), "/") }

// ---- the page ----------------------------------------------------------

type page struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// problems are exceptions and console errors: the page must have none.
	problems []string
}

// openPage opens url in a new tab of the suite's browser.
func openPage(t *testing.T, url string, w, h int64, opts ...chromedp.EmulateViewportOption) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(needBrowser(t))
	p := &page{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		cancel()
		t.Fatal(err)
	}
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// A dashboard that went away makes the browser log failed
			// connections; that is what the banner is for.
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source != "network" &&
				!strings.Contains(m.Text, "net::ERR_")) {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.problems {
			t.Errorf("page console: %s", pr)
		}
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h, opts...), chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	return p
}

// eval runs a JavaScript expression in the page.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// until waits for a JavaScript condition: js returns "ok" when it holds,
// or what it sees instead.
func (p *page) until(what string, timeout time.Duration, js string) time.Duration {
	p.t.Helper()
	start := time.Now()
	testwait.Eventually(p.t, timeout, what, func(context.Context) (bool, string) {
		detail, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
		if err != nil {
			return false, err.Error()
		}
		return detail == "ok", detail
	})
	return time.Since(start)
}

func (p *page) click(css string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(css))); err != nil {
		p.t.Fatalf("click %s: %v", css, err)
	}
}

// js helpers the conditions share.
const jsHelpers = `const card = (n) => document.querySelector('article.blade[data-name="' + n + '"]');`

func cond(body string) string { return "(() => { " + jsHelpers + " " + body + " })()" }

// blinksInStep checks that the page's n visible blinking LEDs are in one
// phase, on for the first half of every wall-clock second as the blades
// blink (a CSS animation restarts whenever its element is moved or shown
// again). They share one timeline, so their phases agree to the
// millisecond; the wall clock is compared more loosely, as the timeline
// advances with frames.
func (p *page) blinksInStep(n int) {
	p.t.Helper()
	got := eval[string](p, `(() => {
		const leds = [...document.querySelectorAll('.led[data-pattern="blink"]')].filter((e) => e.checkVisibility());
		const phases = leds.map((e) => { const a = e.getAnimations()[0]; return a ? ((a.currentTime % 1000) + 1000) % 1000 : NaN; });
		const wall = Date.now() % 1000;
		const apart = (x, y) => { const d = Math.abs(x - y) % 1000; return Math.min(d, 1000 - d); };
		const where = (i) => (leds[i].closest("[data-name]") || {dataset: {name: "?"}}).dataset.name + " " + leds[i].className;
		if (leds.length !== `+fmt.Sprint(n)+`) return leds.length + " blinking LEDs";
		for (let i = 0; i < leds.length; i++) {
			if (Number.isNaN(phases[i])) return where(i) + ": not animated";
			if (apart(phases[i], phases[0]) > 2) return where(i) + " at " + Math.round(phases[i]) + " ms, " + where(0) + " at " + Math.round(phases[0]) + " ms";
		}
		return apart(phases[0], wall) > 150 ? "the LEDs at " + Math.round(phases[0]) + " ms, the wall clock at " + wall + " ms" : "ok";
	})()`)
	if got != "ok" {
		p.t.Errorf("blinking LEDs out of step: %s", got)
	}
}

// waitBlades waits until the page shows these blades.
func (p *page) waitBlades(names ...string) {
	p.t.Helper()
	list := `["` + strings.Join(names, `","`) + `"]`
	p.until("the page to show "+strings.Join(names, ", "), 30*time.Second, cond(
		`const missing = `+list+`.filter((n) => !card(n)); return missing.length ? 'missing: ' + missing.join(' ') : 'ok';`))
}

// ---- tests -------------------------------------------------------------

func TestBrowserDrawsEveryBladeInItsChassisAndSlot(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	createRack(t,
		rackBlade{name: "rk-a1", chassis: "rk-A", slot: "1", status: idle(41)},
		rackBlade{name: "rk-a2", chassis: "rk-A", slot: "2", status: func() v1alpha1.BladeStatus {
			s := idle(44)
			s.PowerSource = "poe-or-usbc"
			s.Fan = v1alpha1.BladeFanStatus{Percent: 60, RPM: i32(4680), Mode: "manual"}
			s.Config = &v1alpha1.AppliedConfig{Name: "rack-a", Generation: 7}
			return s
		}()},
		rackBlade{name: "rk-a4", chassis: "rk-A", slot: "4", status: func() v1alpha1.BladeStatus {
			s := idle(39)
			s.Fan.RPM = nil // no tachometer
			return s
		}()},
		rackBlade{name: "rk-b1", chassis: "rk-B", slot: "1", status: idle(50)},
		rackBlade{name: "rk-b2", chassis: "rk-B", slot: "2", noAgent: true},
		rackBlade{name: "rk-bx", chassis: "rk-B", slot: "left", status: idle(45)},
		rackBlade{name: "rk-pool-b", status: idle(38)},
		rackBlade{name: "rk-pool-a", status: idle(37)},
	)
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, 1280, 900)
	p.waitBlades("rk-a1", "rk-a2", "rk-a4", "rk-b1", "rk-b2", "rk-bx", "rk-pool-a", "rk-pool-b")

	// Each blade in its chassis and slot.
	for name, want := range map[string]string{
		"rk-a1": "rk-A/1", "rk-a2": "rk-A/2", "rk-a4": "rk-A/4", "rk-b1": "rk-B/1", "rk-b2": "rk-B/2",
		"rk-bx": "rk-B/", "rk-pool-a": "/", "rk-pool-b": "/",
	} {
		got := eval[string](p, cond(`const c = card("`+name+`"); return c.closest("section").dataset.chassis + "/" + c.dataset.slot;`))
		if got != want {
			t.Errorf("%s drawn at %q, want %q", name, got, want)
		}
	}
	// Slots in order with the empty one drawn, unusable slots after them,
	// the pool by name, and the chassis in order with the pool last.
	for chassis, want := range map[string]string{
		"rk-A": "1:rk-a1 2:rk-a2 3:empty 4:rk-a4",
		"rk-B": "1:rk-b1 2:rk-b2 :rk-bx",
		"":     ":rk-pool-a :rk-pool-b",
	} {
		got := eval[string](p, cond(`return [...document.querySelector('section[data-chassis="`+chassis+`"] .slots').children]
			.filter((e) => !e.dataset.name || e.dataset.name.startsWith("rk-"))
			.map((e) => e.dataset.slot + ":" + (e.dataset.name || "empty")).join(" ");`))
		if got != want {
			t.Errorf("chassis %q shows %q, want %q", chassis, got, want)
		}
	}
	order := eval[string](p, `[...document.querySelectorAll("main > section")].map((s) => s.dataset.chassis || "pool").filter((c) => c.startsWith("rk-") || c === "pool").join(" ")`)
	if order != "rk-A rk-B pool" {
		t.Errorf("sections in the order %q, want rk-A rk-B pool", order)
	}
	if got := eval[string](p, cond(`return [...card("rk-b2").querySelectorAll(".badge")].map((b) => b.dataset.badge).join(" ")`)); got != "no-agent" {
		t.Errorf("rk-b2 (a Node without Blade) has badges %q, want no-agent", got)
	}
	// What each card says about its fan, power and config.
	for _, tc := range []struct{ name, fan, rpm, power, config string }{
		{"rk-a1", "fan 35 % · auto", "2,730 rpm", "PoE+", "default · gen 2"},
		{"rk-a2", "fan 60 % · manual", "4,680 rpm", "PoE/USB-C", "rack-a · gen 7"},
		{"rk-a4", "fan 35 % · auto", "no tach", "PoE+", "default · gen 2"},
	} {
		got := eval[string](p, cond(`const c = card("`+tc.name+`");
			return [".fan", ".rpm", ".meta:not(.cfg)", ".cfg"].map((s) => c.querySelector(s).textContent).join(" | ");`))
		if want := strings.Join([]string{tc.fan, tc.rpm, tc.power, tc.config}, " | "); got != want {
			t.Errorf("%s reads %q, want %q", tc.name, got, want)
		}
	}
	// The legend is there, closed, and the button opens and closes it.
	legend := `(() => { const l = document.querySelector("#legend"), b = document.querySelector("#legend-toggle");
		return (l.hidden ? "closed" : "open") + " " + b.getAttribute("aria-expanded") + " " + (l.getBoundingClientRect().height > 0 ? "drawn" : "not drawn"); })()`
	if got := eval[string](p, legend); got != "closed false not drawn" {
		t.Errorf("the legend is %q before the button is pressed", got)
	}
	p.click("#legend-toggle")
	p.until("the legend to open", live, `(() => { const r = `+legend+`; return r === "open true drawn" ? "ok" : r; })()`)
	if got := eval[string](p, `[...document.querySelectorAll("#legend h2")].map((h) => h.textContent).join(" ") + " | " +
		[...document.querySelectorAll("#legend .badge")].length`); got != "LEDs Temperature State | 11" {
		t.Errorf("the legend shows %q, want its LEDs, Temperature and State parts with 11 badges", got)
	}
	p.click("#legend-toggle")
	p.until("the legend to close", live, `(() => { const r = `+legend+`; return r === "closed false not drawn" ? "ok" : r; })()`)

	// The default idle colour #001000 is drawn as the green it looks like.
	if got := eval[string](p, cond(`return getComputedStyle(card("rk-a1").querySelector(".led.edge")).backgroundColor`)); got != "rgb(0, 255, 0)" {
		t.Errorf("rk-a1's edge LED (#001000 steady) is drawn %s, want rgb(0, 255, 0)", got)
	}
}

func TestBrowserLEDAndTemperatureChangesAppearLive(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	createRack(t, rackBlade{name: "live-1", chassis: "live", slot: "1", status: idle(42)})
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, 1280, 900)
	p.waitBlades("live-1")

	setStatus(t, "live-1", func(s *v1alpha1.BladeStatus) { s.LEDs.Edge = v1alpha1.LEDStatus{Color: "#ff8000", Pattern: "steady"} })
	took := p.until("the edge LED to turn #ff8000", live, cond(
		`const l = card("live-1").querySelector(".led.edge"); return l.dataset.color === "#ff8000" && l.dataset.pattern === "steady" ? "ok" : l.dataset.color + " " + l.dataset.pattern;`))
	t.Logf("LED colour change shown %v after the Blade's status was written", took.Round(time.Millisecond))

	setStatus(t, "live-1", func(s *v1alpha1.BladeStatus) { s.TemperatureCelsius = i32(71) })
	took = p.until("the temperature to read 71 °C", live, cond(
		`const e = card("live-1").querySelector(".temp"); return e.textContent === "71 °C" ? "ok" : e.textContent;`))
	t.Logf("temperature change shown %v after the Blade's status was written", took.Round(time.Millisecond))
	// The colour scale: 71 °C is just past orange towards red.
	if got := eval[string](p, cond(`return getComputedStyle(card("live-1").querySelector(".temp")).backgroundColor`)); got != "rgb(248, 110, 27)" {
		t.Errorf("71 °C is drawn in %s, want rgb(248, 110, 27)", got)
	}

	// Critical: the top LED blinks (1 s, in the blades' phase), the card says so.
	setStatus(t, "live-1", func(s *v1alpha1.BladeStatus) {
		s.Critical, s.State, s.TemperatureCelsius = true, v1alpha1.BladeStateCritical, i32(86)
		s.Fan = v1alpha1.BladeFanStatus{Percent: 100, RPM: i32(7800), Mode: "critical"}
		s.LEDs = v1alpha1.BladeLEDsStatus{Top: v1alpha1.LEDStatus{Color: "#400000", Pattern: "blink"}, Edge: v1alpha1.LEDStatus{Color: "#400000", Pattern: "steady"}}
	})
	p.until("the critical state", live, cond(`const c = card("live-1"), l = c.querySelector(".led.top"), s = getComputedStyle(l);
		return c.classList.contains("critical") && c.querySelector('[data-badge="critical"]') && l.dataset.pattern === "blink" &&
			s.animationName === "led-blink" && s.animationDuration === "1s" && c.querySelector(".fan").textContent === "fan 100 % · crit"
			? "ok" : c.className + " " + l.dataset.pattern + " " + s.animationName + " " + c.querySelector(".fan").textContent;`))

	// Stealth: dark.
	setStatus(t, "live-1", func(s *v1alpha1.BladeStatus) {
		s.Critical, s.State, s.Stealth, s.TemperatureCelsius = false, v1alpha1.BladeStateStealth, true, i32(40)
		s.LEDs = v1alpha1.BladeLEDsStatus{Top: v1alpha1.LEDStatus{Color: "#000000", Pattern: "off"}, Edge: v1alpha1.LEDStatus{Color: "#001000", Pattern: "steady"}}
	})
	p.until("both LEDs dark in stealth", live, cond(`const c = card("live-1");
		const ps = [...c.querySelectorAll(".led")].map((l) => l.dataset.pattern + "/" + getComputedStyle(l).backgroundColor);
		return ps.every((x) => x === "off/rgb(42, 45, 52)") && c.querySelector('[data-badge="stealth"]') ? "ok" : ps.join(" ");`))
}

func TestBrowserClickTogglesIdentifyThroughTheNodeAnnotation(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	createRack(t, rackBlade{name: "id-1", chassis: "id", slot: "1", status: idle(42)})
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, 1280, 900)
	p.waitBlades("id-1")

	annotation := func(want string) {
		t.Helper()
		testwait.Eventually(t, 10*time.Second, "kubeblade.io/identify="+want, func(ctx context.Context) (bool, string) {
			n := &corev1.Node{}
			if err := suite.admin.Get(ctx, client.ObjectKey{Name: "id-1"}, n); err != nil {
				return false, err.Error()
			}
			got, ok := n.Annotations[v1alpha1.AnnotationIdentify]
			return ok && got == want, fmt.Sprintf("%q (set: %v)", got, ok)
		})
	}
	p.click(`article.blade[data-name="id-1"] .name`)
	annotation("true")
	// The page shows the request at once, and the agent's report after.
	p.until("identify requested on the page", live, cond(`const c = card("id-1"); return c.getAttribute("aria-pressed") === "true" && c.querySelector('[data-badge="identify-requested"]') ? "ok" : c.outerHTML;`))
	setStatus(t, "id-1", func(s *v1alpha1.BladeStatus) {
		s.Identify, s.State = true, v1alpha1.BladeStateIdentify
		s.LEDs.Edge = v1alpha1.LEDStatus{Color: "#100010", Pattern: "blink"}
	})
	p.until("identify reported", live, cond(`const c = card("id-1"), l = c.querySelector(".led.edge"); return c.querySelector('[data-badge="identify"]') && l.dataset.pattern === "blink" ? "ok" : c.outerHTML;`))

	// The second click stops it.
	p.click(`article.blade[data-name="id-1"] .name`)
	annotation("false")
	n := &corev1.Node{}
	if err := suite.admin.Get(ctxT(t), client.ObjectKey{Name: "id-1"}, n); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(n.ManagedFields), dashboard.FieldManager) {
		t.Errorf("the patch is not recorded under field manager %q: %v", dashboard.FieldManager, n.ManagedFields)
	}
}

func TestBrowserShowsAStaleAgent(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	createRack(t, rackBlade{name: "st-1", chassis: "st", slot: "1", status: idle(42)},
		rackBlade{name: "st-2", chassis: "st", slot: "2", status: idle(43)})
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, 1280, 900)
	p.waitBlades("st-1", "st-2")
	if got := eval[string](p, cond(`return card("st-1").dataset.agent`)); got != dashboard.AgentReporting {
		t.Fatalf("st-1 is %q before going stale", got)
	}
	// What the operator writes when heartbeats stop (docs/cluster-aware.md).
	setStatus(t, "st-1", func(s *v1alpha1.BladeStatus) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.BladeConditionAgentReady,
			Status: metav1.ConditionUnknown, Reason: dashboard.ReasonHeartbeatStale, Message: "no heartbeat for 16m0s"})
	})
	p.until("st-1 shown stale", live, cond(`const c = card("st-1"); return c.dataset.agent === "stale" && c.classList.contains("stale") &&
		c.querySelector('[data-badge="stale"]') && getComputedStyle(c).opacity < 1 ? "ok" : c.outerHTML;`))
	if got := eval[string](p, cond(`return card("st-2").dataset.agent`)); got != dashboard.AgentReporting {
		t.Errorf("st-2 is %q, want reporting", got)
	}
	// The summary counts it and the filter finds it.
	p.until("the summary to count one stale blade", live, `[...document.querySelectorAll("#summary .chip")].some((c) => c.textContent === "1 stale") ? "ok" : document.querySelector("#summary").textContent`)
	if err := chromedp.Do(p.ctx, chromedp.SendKeys(chromedp.CSS("#filter"), "stale")); err != nil {
		t.Fatal(err)
	}
	p.until("the filter to keep only st-1", live, `[...document.querySelectorAll("article.blade")].filter((c) => !c.hidden).map((c) => c.dataset.name).join(" ") === "st-1" ? "ok" :
		[...document.querySelectorAll("article.blade")].filter((c) => !c.hidden).map((c) => c.dataset.name).join(" ")`)
}

func TestBrowserDetailPanelShowsRecentEvents(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	createRack(t, rackBlade{name: "ev-1", chassis: "ev", slot: "1", status: idle(42),
		annotations: map[string]string{dashboard.AnnotationMaintenance: "true", dashboard.AnnotationMaintenanceState: "draining"}})
	now := time.Now()
	nodeEvent(t, "ev-1", "AgentStarted", "kubeblade-agent v0.5.0 on the simulated backend", corev1.EventTypeNormal, now.Add(-2*time.Minute))
	nodeEvent(t, "ev-1", "MaintenanceRequested", "button held 3 s", corev1.EventTypeNormal, now.Add(-time.Minute))
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, 1280, 900)
	p.waitBlades("ev-1")
	if got := eval[string](p, cond(`return [...card("ev-1").querySelectorAll(".badge")].map((b) => b.dataset.badge).join(" ")`)); got != "maintenance-draining" {
		t.Errorf("ev-1 badges %q, want maintenance-draining", got)
	}

	p.click(`article.blade[data-name="ev-1"] .more`)
	p.until("the detail panel with ev-1's Events", 10*time.Second, `(() => { const d = document.querySelector("#detail");
		const r = [...d.querySelectorAll("#detail-events li")].map((l) => l.dataset.reason).join(" ");
		return !d.hidden && d.dataset.name === "ev-1" && r === "MaintenanceRequested AgentStarted" ? "ok" : r; })()`)
	// New Events arrive live, newest first.
	nodeEvent(t, "ev-1", "Draining", "evicting 3 pods", corev1.EventTypeNormal, time.Now())
	p.until("the new Event in the panel", live, `[...document.querySelectorAll("#detail-events li")].map((l) => l.dataset.reason).join(" ") === "Draining MaintenanceRequested AgentStarted" ? "ok" :
		[...document.querySelectorAll("#detail-events li")].map((l) => l.dataset.reason).join(" ")`)
	// Opening the details did not toggle identify.
	n := &corev1.Node{}
	if err := suite.admin.Get(ctxT(t), client.ObjectKey{Name: "ev-1"}, n); err != nil {
		t.Fatal(err)
	}
	if v, ok := n.Annotations[v1alpha1.AnnotationIdentify]; ok {
		t.Errorf("opening the details set identify=%s", v)
	}
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS("#detail-close"))); err != nil {
		t.Fatal(err)
	}
	p.until("the panel to close", live, `document.querySelector("#detail").hidden ? "ok" : "open"`)
}

func TestBrowserDisconnectedBanner(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	createRack(t, rackBlade{name: "dc-1", chassis: "dc", slot: "1", status: idle(42)})
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, 1280, 900)
	p.waitBlades("dc-1")
	banner := `(() => { const b = document.querySelector("#banner"); return b.hidden ? "ok" : b.dataset.kind; })()`
	if got := eval[string](p, banner); got != "ok" {
		t.Fatalf("banner %q before anything went away", got)
	}

	t.Run("the dashboard server goes away and returns", func(t *testing.T) {
		addr := d.listen()
		d.stop(t)
		p.until("the disconnected banner", 10*time.Second, `document.querySelector("#banner").dataset.kind === "disconnected" ? "ok" : "banner: " + document.querySelector("#banner").dataset.kind`)
		// The last known state stays on the page meanwhile.
		if eval[bool](p, cond(`return !card("dc-1")`)) {
			t.Error("the blades vanished with the connection")
		}
		startDashboard(t, addr)
		p.until("the banner to clear", 15*time.Second, banner)
		p.waitBlades("dc-1")
	})

	t.Run("the Kubernetes API server goes away and returns", func(t *testing.T) {
		d := startDashboard(t, "127.0.0.1:0")
		p := openPage(t, d.url, 1280, 900)
		p.waitBlades("dc-1")
		if err := suite.env.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		restarted := false
		defer func() {
			if !restarted {
				_ = suite.env.StartAPIServer()
			}
		}()
		p.until("the unreachable banner", 20*time.Second, `document.querySelector("#banner").dataset.kind === "unreachable" ? "ok" : "banner: " + document.querySelector("#banner").dataset.kind`)
		msg := eval[string](p, `document.querySelector("#banner").textContent`)
		if !strings.Contains(msg, "cannot reach the Kubernetes API") {
			t.Errorf("banner %q does not say the API cannot be reached", msg)
		}
		if err := suite.env.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		restarted = true
		// The reflectors retry with a backoff of up to 30 s.
		p.until("the banner to clear", 60*time.Second, banner)
		setStatus(t, "dc-1", func(s *v1alpha1.BladeStatus) { s.TemperatureCelsius = i32(55) })
		// Recovery, not latency (that is tested above): a restarted API
		// server refills its watch cache before it streams changes again.
		p.until("updates to flow again", 30*time.Second, cond(`return card("dc-1").querySelector(".temp").textContent === "55 °C" ? "ok" : "not yet"`))
		for _, want := range []string{"error: blades: cannot reach the Kubernetes API", "dashboard: watching blades again"} {
			if !strings.Contains(d.err.String(), want) {
				t.Errorf("the command line did not say %q:\n%s", want, d.err)
			}
		}
	})
}

func TestBrowserActionableErrors(t *testing.T) {
	needCluster(t)
	needBrowser(t)

	t.Run("no permission to list Blades", func(t *testing.T) {
		d := startDashboard(t, "127.0.0.1:0", "--context", "viewer")
		p := openPage(t, d.url, 1280, 900)
		p.until("the forbidden explanation", 20*time.Second, `(() => { const f = document.querySelector("#fatal");
			return !f.hidden && f.dataset.problem === "forbidden" ? "ok" : f.dataset.problem + " " + f.textContent; })()`)
		msg := eval[string](p, `document.querySelector("#fatal-message").textContent`)
		for _, want := range []string{"no permission to list and watch blades.kubeblade.io", `User "viewer" cannot`, "ask your cluster admin"} {
			if !strings.Contains(msg, want) {
				t.Errorf("page says %q, want it to contain %q", msg, want)
			}
		}
		testwait.Eventually(t, 10*time.Second, "the error on the command line", func(context.Context) (bool, string) {
			return strings.Contains(d.err.String(), "error: blades: no permission to list and watch blades.kubeblade.io"), d.err.String()
		})
	})

	t.Run("the CRD is not installed, then installed", func(t *testing.T) {
		crds := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")
		opts := envtest.CRDInstallOptions{Paths: []string{crds}}
		if err := envtest.UninstallCRDs(suite.env.Config, opts); err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t, 60*time.Second, "the Blade CRD to be gone", func(ctx context.Context) (bool, string) {
			err := suite.admin.List(ctx, &v1alpha1.BladeList{})
			return meta.IsNoMatchError(err) || apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		// Every CRD object gone too, not only out of discovery: one still
		// terminating makes InstallCRDs below fail ("unable to create CRD
		// instances: ... not found"), as seen on a loaded machine.
		testwait.Eventually(t, 60*time.Second, "the CRDs deleted", func(ctx context.Context) (bool, string) {
			for _, name := range []string{"blades.kubeblade.io", "bladeconfigs.kubeblade.io"} {
				crd := &unstructured.Unstructured{}
				crd.SetAPIVersion("apiextensions.k8s.io/v1")
				crd.SetKind("CustomResourceDefinition")
				if err := suite.admin.Get(ctx, client.ObjectKey{Name: name}, crd); !apierrors.IsNotFound(err) {
					return false, fmt.Sprintf("%s: %v", name, err)
				}
			}
			return true, ""
		})
		installed := false
		defer func() {
			if !installed {
				_, _ = envtest.InstallCRDs(suite.env.Config, opts)
			}
		}()
		d := startDashboard(t, "127.0.0.1:0")
		p := openPage(t, d.url, 1280, 900)
		p.until("the not-installed explanation", 20*time.Second, `(() => { const f = document.querySelector("#fatal");
			return !f.hidden && f.dataset.problem === "notInstalled" ? "ok" : f.dataset.problem + " " + f.textContent; })()`)
		msg := eval[string](p, `document.querySelector("#fatal-message").textContent`)
		if !strings.Contains(msg, "has no Blade resource (blades.kubeblade.io/v1alpha1): kubeblade is not installed") {
			t.Errorf("page says %q", msg)
		}
		if !strings.Contains(d.err.String(), "error: blades: the Kubernetes API at https://127.0.0.1:") {
			t.Errorf("command line says:\n%s", d.err)
		}

		if _, err := envtest.InstallCRDs(suite.env.Config, opts); err != nil {
			t.Fatal(err)
		}
		installed = true
		createRack(t, rackBlade{name: "crd-1", chassis: "crd", slot: "1", status: idle(40)})
		// The reflector retries with a backoff of up to 30 s.
		p.waitBlades("crd-1")
		// While the new resource settles in the API server's discovery a
		// watch can still fail once; the page follows.
		p.until("the explanation to go", 30*time.Second, `document.querySelector("#fatal").hidden ? "ok" : document.querySelector("#fatal-message").textContent`)
	})
}

func TestBrowserReadableOnAPhoneAndA4KWall(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	var blades []rackBlade
	for i := 1; i <= 20; i++ {
		blades = append(blades, rackBlade{name: fmt.Sprintf("sz-%02d", i), chassis: "sz", slot: fmt.Sprint(i), status: idle(int32(38 + i))})
	}
	createRack(t, blades...)
	d := startDashboard(t, "127.0.0.1:0")
	for name, tc := range map[string]struct {
		w, h        int64
		opts        []chromedp.EmulateViewportOption
		minFontPx   float64 // the blade name's
		maxRowsOf20 int
	}{
		"phone":   {w: 390, h: 844, opts: []chromedp.EmulateViewportOption{chromedp.EmulateScale(3), chromedp.EmulateMobile}, minFontPx: 11, maxRowsOf20: 5},
		"desktop": {w: 1920, h: 1080, minFontPx: 14, maxRowsOf20: 2},
		"4K wall": {w: 3840, h: 2160, minFontPx: 22, maxRowsOf20: 2},
	} {
		t.Run(name, func(t *testing.T) {
			p := openPage(t, d.url, tc.w, tc.h, tc.opts...)
			p.waitBlades("sz-01", "sz-20")
			if over := eval[float64](p, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
				t.Errorf("the page is %v px wider than the screen", over)
			}
			if px := eval[float64](p, cond(`return parseFloat(getComputedStyle(card("sz-01").querySelector(".name")).fontSize)`)); px < tc.minFontPx {
				t.Errorf("blade names are %v px, want at least %v", px, tc.minFontPx)
			}
			rows := eval[float64](p, `new Set([...document.querySelectorAll('section[data-chassis="sz"] .slots > *')].map((e) => Math.round(e.getBoundingClientRect().top))).size`)
			if rows > float64(tc.maxRowsOf20) {
				t.Errorf("a chassis of 20 blades takes %v rows, want at most %d", rows, tc.maxRowsOf20)
			}
			// Every card shows its text uncut enough to read the temperature
			// (waited for: a page opened as the dashboard starts can have the
			// Nodes before the Blades, and draws a card without agent first).
			p.until("sz-20 to read 58 °C", live, cond(`const t = card("sz-20").querySelector(".temp").textContent; return t === "58 °C" ? "ok" : t;`))
		})
	}
}

// TestBrowserScreenshot draws make demo's rack and takes the screenshot
// docs/dashboard.md shows (`make dashboard-screenshot` writes it there).
// The rack comes from the demo's own definitions: its Nodes and their
// chassis and slots (internal/localcluster, which hack/localcluster
// applies) and its BladeConfig (hack/demo/bladeconfig.yaml). No agents or
// operator run here: the Blades' status is written as the demo's
// simulated agents report it at three steps of its walk-through
// (hack/demo-cluster.sh): blade-1 identifying (step 2), blade-2 overheated
// to 75 °C (step 4) and blade-3 drained for maintenance (step 9).
func TestBrowserScreenshot(t *testing.T) {
	needCluster(t)
	needBrowser(t)
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "demo", "bladeconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bc := &v1alpha1.BladeConfig{}
	if err := yaml.UnmarshalStrict(raw, bc); err != nil {
		t.Fatalf("hack/demo/bladeconfig.yaml: %v", err)
	}
	if err := suite.admin.Create(ctxT(t), bc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.admin.Delete(context.Background(), bc) })
	agent := bc.Spec.Agent
	if len(agent.FanCurve) == 0 || agent.CriticalCelsius == 0 || agent.CriticalCelsius >= 75 {
		t.Fatalf("the demo's BladeConfig changed (fan curve %v, criticalCelsius %d): make this test follow it", agent.FanCurve, agent.CriticalCelsius)
	}
	// As the simulated backend reports it (internal/hardware/simulated:
	// PoE+, 5 000 rpm at full duty), below the fan curve's first step.
	const maxRPM = 5000
	demo := func(temp int32) v1alpha1.BladeStatus {
		s := idle(temp)
		s.Config = &v1alpha1.AppliedConfig{Name: bc.Name, Generation: bc.Generation}
		pct := agent.FanCurve[0].Percent
		s.Fan = v1alpha1.BladeFanStatus{Percent: pct, RPM: i32(pct * maxRPM / 100), Mode: "auto"}
		return s
	}
	labels := localcluster.ChassisLabels(localcluster.DemoChassis, localcluster.DefaultNodes)
	var rack []rackBlade
	for _, name := range localcluster.DefaultNodes {
		b := rackBlade{name: name, chassis: labels[name][dashboard.LabelChassis], slot: labels[name][dashboard.LabelSlot]}
		switch name {
		case "blade-1": // step 2: kubectl annotate node blade-1 kubeblade.io/identify=true
			b.status = demo(41)
			b.status.Identify, b.status.State = true, v1alpha1.BladeStateIdentify
			b.status.LEDs.Edge = v1alpha1.LEDStatus{Color: config.DefaultIdentifyColor, Pattern: "blink"}
			b.annotations = map[string]string{v1alpha1.AnnotationIdentify: "true"}
		case "blade-2": // step 4: load 2, 75 °C
			b.status = demo(75)
			b.status.Critical, b.status.State = true, v1alpha1.BladeStateCritical
			b.status.Fan = v1alpha1.BladeFanStatus{Percent: 100, RPM: i32(maxRPM), Mode: "critical"}
			b.status.LEDs = v1alpha1.BladeLEDsStatus{Top: v1alpha1.LEDStatus{Color: config.DefaultCriticalColor, Pattern: "blink"},
				Edge: v1alpha1.LEDStatus{Color: config.DefaultCriticalColor, Pattern: "steady"}}
		case "blade-3": // step 9: the button held 3.5 s, drained
			b.status = demo(38)
			b.status.LEDs.Edge = v1alpha1.LEDStatus{Color: config.DefaultSafeToPullColor, Pattern: "steady"}
			b.annotations = map[string]string{dashboard.AnnotationMaintenance: "true", dashboard.AnnotationMaintenanceState: "drained"}
			b.unschedulable = true
		default:
			t.Fatalf("the demo has a blade %s this test does not know: make it follow the demo", name)
		}
		rack = append(rack, b)
	}
	createRack(t, rack...)
	now := time.Now()
	nodeEvent(t, "blade-2", "AgentStarted", "kubeblade-agent on the simulated backend", corev1.EventTypeNormal, now.Add(-6*time.Minute))
	nodeEvent(t, "blade-2", "ConfigApplied", fmt.Sprintf("BladeConfig %s generation %d", bc.Name, bc.Generation), corev1.EventTypeNormal, now.Add(-6*time.Minute+time.Second))
	nodeEvent(t, "blade-2", "CriticalTemperature", fmt.Sprintf("75 °C ≥ criticalCelsius %d: fan 100 %%", agent.CriticalCelsius), corev1.EventTypeWarning, now.Add(-20*time.Second))
	for i, r := range []string{"ButtonLongPressed", "MaintenanceRequested", "Draining", "Drained"} {
		nodeEvent(t, "blade-3", r, "maintenance from the button", corev1.EventTypeNormal, now.Add(time.Duration(i-10)*time.Second))
	}
	d := startDashboard(t, "127.0.0.1:0")
	p := openPage(t, d.url, shotWidth, shotHeight)
	p.waitBlades(localcluster.DefaultNodes...)
	// The demo's rack only: blades other tests left behind would show.
	p.until("only the demo's blades", 10*time.Second, `(() => { const n = [...document.querySelectorAll("article.blade")].map((c) => c.dataset.name).join(" ");
		return n === "`+strings.Join(localcluster.DefaultNodes, " ")+`" ? "ok" : n; })()`)
	p.click(`article.blade[data-name="blade-2"] .more`)
	p.until("the detail panel with blade-2's Events", 10*time.Second, `document.querySelectorAll("#detail-events li").length === 3 ? "ok" : "not yet"`)
	// Blades arriving one by one laid the rack out again: the blinking
	// LEDs still blink together, on the wall clock's second.
	p.blinksInStep(3)
	// Blinking LEDs are caught in their on phase.
	p.until("the on half of the blink", 2*time.Second, `Date.now() % 1000 < 400 ? "ok" : "off phase"`)
	shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != shotWidth || b.Dy() < shotHeight {
		t.Errorf("screenshot is %v", b)
	}
	out := filepath.Join(t.TempDir(), "dashboard.png")
	if *screenshotPath != "" {
		out = *screenshotPath
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(shot))
}
