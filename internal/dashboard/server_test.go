package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeIdentifier records identify requests.
type fakeIdentifier struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeIdentifier) SetIdentify(_ context.Context, node string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s=%v", node, on))
	return f.err
}

const testToken = "t0ken"

func newTestServer(t *testing.T, h *Hub, id Identifier, clk *clocktesting.FakeClock) *httptest.Server {
	t.Helper()
	o := Options{Hub: h, Identify: id, Token: testToken, Hosts: []string{"wall.example"}}
	if clk != nil {
		o.Clock = clk
	}
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func TestPageAndAssets(t *testing.T) {
	ts := newTestServer(t, NewHub(HubOptions{}), &fakeIdentifier{}, nil)
	res, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `<meta name="kubeblade-token" content="`+testToken+`">`) {
		t.Fatalf("GET / = %d, token not in the page:\n%s", res.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Security-Policy": contentSecurityPolicy, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
	} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	for _, p := range []string{"/assets/app.js", "/assets/app.css", "/assets/favicon.svg"} {
		res, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", p, res.StatusCode)
		}
	}
}

// Everything the page loads is embedded: no CDN, no web fonts, nothing
// that names another host (the SVG namespace is a name, not a download).
func TestAssetsLoadNothingFromElsewhere(t *testing.T) {
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|@font-face|url\(`)
	err := fs.WalkDir(webFS, "web", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := webFS.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range url.FindAllString(string(b), -1) {
			if m != "http://www.w3.org" {
				t.Errorf("%s refers to %q", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestIdentifyRequests(t *testing.T) {
	for name, tc := range map[string]struct {
		host, origin, site, token, body string
		idErr                           error
		wantCode                        int
		wantCalls                       []string
	}{
		"same origin with the token": {site: "same-origin", token: testToken, body: `{"identify":true}`,
			wantCode: http.StatusOK, wantCalls: []string{"blade-1=true"}},
		"off": {site: "same-origin", token: testToken, body: `{"identify":false}`,
			wantCode: http.StatusOK, wantCalls: []string{"blade-1=false"}},
		"no token":    {site: "same-origin", body: `{"identify":true}`, wantCode: http.StatusForbidden},
		"wrong token": {site: "same-origin", token: "guess", body: `{"identify":true}`, wantCode: http.StatusForbidden},
		"cross-site even with the token": {site: "cross-site", origin: "https://evil.example", token: testToken,
			body: `{"identify":true}`, wantCode: http.StatusForbidden},
		"old browser, foreign Origin": {origin: "https://evil.example", token: testToken, body: `{"identify":true}`,
			wantCode: http.StatusForbidden},
		"DNS rebinding: foreign host name": {host: "evil.example:8080", site: "same-origin", token: testToken,
			body: `{"identify":true}`, wantCode: http.StatusMisdirectedRequest},
		"an allowed host name": {host: "wall.example:8080", site: "same-origin", token: testToken,
			body: `{"identify":true}`, wantCode: http.StatusOK, wantCalls: []string{"blade-1=true"}},
		"bad body":   {site: "same-origin", token: testToken, body: `{"identify":"yes"}`, wantCode: http.StatusBadRequest},
		"empty body": {site: "same-origin", token: testToken, body: `{}`, wantCode: http.StatusBadRequest},
		"unknown node": {site: "same-origin", token: testToken, body: `{"identify":true}`, idErr: fmt.Errorf("%w: blade-1", ErrNodeNotFound),
			wantCode: http.StatusNotFound, wantCalls: []string{"blade-1=true"}},
	} {
		t.Run(name, func(t *testing.T) {
			id := &fakeIdentifier{err: tc.idErr}
			ts := newTestServer(t, NewHub(HubOptions{}), id, nil)
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/blades/blade-1/identify", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if tc.token != "" {
				req.Header.Set(TokenHeader, tc.token)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.wantCode {
				t.Errorf("status %d (%s), want %d", res.StatusCode, b, tc.wantCode)
			}
			if res.StatusCode != http.StatusOK {
				var e struct{ Error string }
				if json.Unmarshal(b, &e) != nil || e.Error == "" {
					t.Errorf("error body %q has no message", b)
				}
			}
			if d := cmp.Diff(tc.wantCalls, id.calls); d != "" {
				t.Errorf("identify calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadsRefuseForeignHosts(t *testing.T) {
	ts := newTestServer(t, NewHub(HubOptions{}), &fakeIdentifier{}, nil)
	for host, want := range map[string]int{
		"127.0.0.1:8080": http.StatusOK, "localhost:8080": http.StatusOK, "[::1]:8080": http.StatusOK,
		"192.168.1.20:8080": http.StatusOK, "attacker.example": http.StatusMisdirectedRequest,
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/blades/x/events", nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}

func TestEventsEndpoint(t *testing.T) {
	h := NewHub(HubOptions{})
	h.SetEvent(event("e1", "blade-a2", "CriticalTemperature", "83 °C", fixtureTime, true))
	h.SetEvent(event("e2", "blade-a2", "TemperatureNormal", "", fixtureTime.Add(time.Minute), false))
	ts := newTestServer(t, h, &fakeIdentifier{}, nil)
	for node, want := range map[string][]string{"blade-a2": {"TemperatureNormal", "CriticalTemperature"}, "other": {}} {
		res, err := http.Get(ts.URL + "/api/blades/" + node + "/events")
		if err != nil {
			t.Fatal(err)
		}
		var got []Event
		if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		reasons := []string{}
		for _, e := range got {
			reasons = append(reasons, e.Reason)
		}
		if d := cmp.Diff(want, reasons); d != "" {
			t.Errorf("%s events (-want +got):\n%s", node, d)
		}
	}
}

// sseReader reads server-sent events from a stream.
type sseReader struct {
	t *testing.T
	r *bufio.Reader
}

func (s sseReader) next() message {
	s.t.Helper()
	var m message
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if m.event != "" {
				return m
			}
		case strings.HasPrefix(line, "event: "):
			m.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			m.data = json.RawMessage(line[len("data: "):])
		case strings.HasPrefix(line, "retry: "):
		default:
			s.t.Fatalf("unexpected line %q", line)
		}
	}
}

func TestStream(t *testing.T) {
	clk := clocktesting.NewFakeClock(fixtureTime)
	h := loaded(t)
	ts := newTestServer(t, h, &fakeIdentifier{}, clk)
	res, err := http.Get(ts.URL + "/api/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sse := sseReader{t, bufio.NewReader(res.Body)}
	if m := sse.next(); m.event != "snapshot" || !strings.Contains(string(m.data), `"name":"blade-a2"`) {
		t.Fatalf("first message %s %.80s, want the snapshot", m.event, m.data)
	}

	_, blades := fixtures()
	b := blades[1].DeepCopy()
	b.Status.LEDs.Edge.Color = "#00ffff"
	h.SetBlade(b)
	h.Flush()
	if m := sse.next(); m.event != "blades" || string(m.data) != `{"patch":[{"name":"blade-a2","leds":{"edge":{"color":"#00ffff"}}}]}` {
		t.Fatalf("got %s %s, want blade-a2's new edge colour", m.event, m.data)
	}

	// An idle stream pings, so the page can tell a quiet cluster from a
	// dead connection.
	clk.Step(10 * time.Second)
	if m := sse.next(); m.event != "ping" {
		t.Fatalf("got %s, want ping", m.event)
	}
}
