package opsserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeblade_test_gauge", Help: "x"})
	g.Set(3)
	reg.MustRegister(g)
	ready := errors.New("hardware loop not running")
	s, err := Listen(Options{
		Address:  "127.0.0.1:0",
		Gatherer: reg,
		Live:     map[string]Check{"process": func() error { return nil }},
		Ready:    map[string]Check{"agent": func() error { return ready }, "process": func() error { return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	base := "http://" + s.Addr().String()

	cases := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/metrics", 200, "kubeblade_test_gauge 3"},
		{"/healthz", 200, "ok"},
		{"/healthz?verbose", 200, "[+] process ok"},
		{"/readyz", 503, "[-] agent failed: hardware loop not running"},
		{"/debug/pprof/", 404, ""},
	}
	for _, tc := range cases {
		code, body := get(t, base+tc.path)
		if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
			t.Errorf("GET %s = %d %q, want %d containing %q", tc.path, code, body, tc.wantCode, tc.wantBody)
		}
	}
	ready = nil
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("readyz after recovery = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestListenErrorNamesAddress(t *testing.T) {
	_, err := Listen(Options{Address: "256.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "256.0.0.1:1") {
		t.Fatalf("err = %v", err)
	}
}
