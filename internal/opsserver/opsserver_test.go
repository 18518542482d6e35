package opsserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

func TestStalledWorkqueues(t *testing.T) {
	reg := prometheus.NewRegistry()
	// The gauge as client-go's workqueue (through controller-runtime)
	// registers it.
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LongestRunningProcessorMetric, Help: "x"}, []string{"controller", "name"})
	reg.MustRegister(g)
	check := StalledWorkqueues(reg, 2*time.Minute)
	cases := []struct {
		name    string
		ages    map[string]float64
		wantErr string
	}{
		{name: "no controllers yet"},
		{name: "idle", ages: map[string]float64{"bladeconfig-daemonset": 0, "bladeconfig-status": 0}},
		{name: "busy but within the limit", ages: map[string]float64{"bladeconfig-daemonset": 119.5}},
		{name: "one stuck", ages: map[string]float64{"bladeconfig-daemonset": 0, "bladeconfig-status": 600},
			wantErr: "reconcile running longer than 2m0s in bladeconfig-status (10m0s)"},
		{name: "two stuck, named in order", ages: map[string]float64{"b": 200, "a": 300},
			wantErr: "reconcile running longer than 2m0s in a (5m0s), b (3m20s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g.Reset()
			for n, age := range tc.ages {
				g.WithLabelValues(n, n).Set(age)
			}
			err := check()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("check() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}
