package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/dashboard"
	"github.com/kubeblade/kubeblade/internal/testwait"
)

// countingClient counts the watches opened through it, per kind: how many
// were started and how many are open now.
type countingClient struct {
	client.WithWatch
	mu          sync.Mutex
	calls, open map[string]int
}

func kindOf(l client.ObjectList) string {
	switch l.(type) {
	case *v1alpha1.BladeList:
		return dashboard.KindBlades
	case *corev1.NodeList:
		return dashboard.KindNodes
	case *eventsv1.EventList:
		return dashboard.KindEvents
	}
	return fmt.Sprintf("%T", l)
}

func (c *countingClient) Watch(ctx context.Context, l client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	w, err := c.WithWatch.Watch(ctx, l, opts...)
	if err != nil {
		return w, err
	}
	kind := kindOf(l)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[kind]++
	c.open[kind]++
	return &countedWatch{Interface: w, stopped: sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.open[kind]--
	})}, nil
}

// counts says how many watches were started and are open, per kind.
func (c *countingClient) counts() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, k := range []string{dashboard.KindBlades, dashboard.KindNodes, dashboard.KindEvents} {
		parts = append(parts, fmt.Sprintf("%s: %d started, %d open", k, c.calls[k], c.open[k]))
	}
	for k, n := range c.calls {
		if k != dashboard.KindBlades && k != dashboard.KindNodes && k != dashboard.KindEvents {
			parts = append(parts, fmt.Sprintf("%s: %d started", k, n))
		}
	}
	return strings.Join(parts, "; ")
}

type countedWatch struct {
	watch.Interface
	stopped func()
}

func (w *countedWatch) Stop() {
	w.Interface.Stop()
	w.stopped()
}

// oneWatchEach is what the server must hold however many pages are open.
const oneWatchEach = "blades: 1 started, 1 open; nodes: 1 started, 1 open; events: 1 started, 1 open"

// TestOneWatchPerKindHoweverManyPages serves the dashboard as bladectl does
// (one Source, one Hub, one Server) with a client that counts its watches,
// and opens many streams and two browser tabs against it: the API server
// sees one watch per kind, and every page still gets every change.
func TestOneWatchPerKindHoweverManyPages(t *testing.T) {
	needCluster(t)
	createRack(t, rackBlade{name: "ow-1", chassis: "ow", slot: "1", status: idle(42)})
	c, err := client.NewWithWatch(suite.env.Config, client.Options{Scheme: dashboard.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingClient{WithWatch: c, calls: map[string]int{}, open: map[string]int{}}
	hub := dashboard.NewHub(dashboard.HubOptions{})
	src := &dashboard.Source{Client: cc, Hub: hub, Server: suite.env.Config.Host}
	srv, err := dashboard.NewServer(dashboard.Options{Hub: hub, Identify: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx.Done()) })
	wg.Go(func() { src.Run(ctx) })
	hs := httptest.NewUnstartedServer(srv)
	// Streams end with ctx, as in bladectl, so Close does not wait for them.
	hs.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	hs.Start()
	t.Cleanup(func() {
		cancel()
		hs.Close()
		wg.Wait()
	})
	watches := func(what string) {
		t.Helper()
		testwait.Eventually(t, 30*time.Second, what, func(context.Context) (bool, string) {
			got := cc.counts()
			return got == oneWatchEach, got
		})
	}
	watches("one watch per kind before any page is open")

	const streams = 8
	bodies := make([]*syncBuffer, streams)
	for i := range bodies {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/api/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s", i, resp.Status)
		}
		bodies[i] = &syncBuffer{}
		wg.Go(func() {
			defer resp.Body.Close()
			_, _ = io.Copy(bodies[i], resp.Body)
		})
	}
	// everyStream waits until every stream has received want.
	everyStream := func(what, want string) {
		t.Helper()
		testwait.Eventually(t, 10*time.Second, what, func(context.Context) (bool, string) {
			for i, b := range bodies {
				if !strings.Contains(b.String(), want) {
					return false, fmt.Sprintf("stream %d has not: %s", i, want)
				}
			}
			return true, ""
		})
	}
	testwait.Eventually(t, 10*time.Second, fmt.Sprintf("%d subscribed pages", streams), func(context.Context) (bool, string) {
		return hub.Subscribers() == streams, fmt.Sprint(hub.Subscribers())
	})
	everyStream("ow-1 on every stream", `"name":"ow-1"`)
	setStatus(t, "ow-1", func(s *v1alpha1.BladeStatus) { s.TemperatureCelsius = i32(57) })
	everyStream("the change on every stream", `"temperatureCelsius":57`)
	if got := cc.counts(); got != oneWatchEach {
		t.Errorf("with %d streams open the server holds %s, want %s", streams, got, oneWatchEach)
	}

	t.Run("and two browser tabs", func(t *testing.T) {
		needBrowser(t)
		tabs := []*page{openPage(t, hs.URL+"/", 1280, 900), openPage(t, hs.URL+"/", 1280, 900)}
		for _, p := range tabs {
			p.waitBlades("ow-1")
		}
		testwait.Eventually(t, 10*time.Second, fmt.Sprintf("%d subscribed pages", streams+len(tabs)), func(context.Context) (bool, string) {
			return hub.Subscribers() == streams+len(tabs), fmt.Sprint(hub.Subscribers())
		})
		setStatus(t, "ow-1", func(s *v1alpha1.BladeStatus) { s.TemperatureCelsius = i32(63) })
		for i, p := range tabs {
			p.until(fmt.Sprintf("tab %d to read 63 °C", i+1), live, cond(
				`const e = card("ow-1").querySelector(".temp"); return e.textContent === "63 °C" ? "ok" : e.textContent;`))
		}
		everyStream("the change on every stream", `"temperatureCelsius":63`)
		if got := cc.counts(); got != oneWatchEach {
			t.Errorf("with %d streams and %d tabs open the server holds %s, want %s", streams, len(tabs), got, oneWatchEach)
		}
	})
}
