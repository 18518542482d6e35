// Package opsserver serves a process's operations endpoints: Prometheus
// /metrics, liveness /healthz and readiness /readyz. It serves nothing else
// (no pprof), because it usually listens on a node-wide port.
package opsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports a problem as an error, or nil when healthy.
type Check func() error

// Options configure a Server.
type Options struct {
	// Address to listen on, e.g. ":9666" or "127.0.0.1:0".
	Address  string
	Gatherer prometheus.Gatherer
	// Live and Ready are named checks for /healthz and /readyz.
	Live, Ready map[string]Check
	Logger      *slog.Logger
}

// Server is a running operations endpoint.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

// Listen binds the address; Serve then serves on it. Binding first lets the
// caller fail fast (and learn the port of ":0") before starting anything else.
func Listen(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s: %w", o.Address, err)
	}
	mux := http.NewServeMux()
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	}
	mux.Handle("GET /healthz", checksHandler(o.Live))
	mux.Handle("GET /readyz", checksHandler(o.Ready))
	return &Server{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		ln:  ln,
		log: o.Logger,
	}, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := s.srv.Shutdown(sctx)
		if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = e
		}
		return err
	}
}

// checksHandler answers 200 "ok" when every check passes and 503 with the
// failing checks otherwise; ?verbose lists every check.
func checksHandler(checks map[string]Check) http.Handler {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		failed := false
		for _, n := range names {
			if err := checks[n](); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-] %s failed: %v\n", n, err)
			} else {
				fmt.Fprintf(&b, "[+] %s ok\n", n)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, b.String())
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, b.String())
		}
		fmt.Fprintln(w, "ok")
	})
}

// LongestRunningProcessorMetric is client-go's workqueue gauge (registered
// by controller-runtime for every controller): how long the oldest item a
// worker is processing has been running, i.e. the age of the oldest
// unfinished reconcile.
const LongestRunningProcessorMetric = "workqueue_longest_running_processor_seconds"

// StalledWorkqueues returns a Check that fails when a worker of any
// workqueue in g has been processing one item for longer than limit: a
// reconcile that never returns (a deadlock, a call without a timeout) stops
// its controller from handling anything else, which no restart-free path
// recovers from. Idle controllers report 0 and pass.
func StalledWorkqueues(g prometheus.Gatherer, limit time.Duration) Check {
	return func() error {
		mfs, err := g.Gather()
		if err != nil {
			return fmt.Errorf("gathering metrics: %w", err)
		}
		var stuck []string
		for _, mf := range mfs {
			if mf.GetName() != LongestRunningProcessorMetric {
				continue
			}
			for _, m := range mf.GetMetric() {
				age := time.Duration(m.GetGauge().GetValue() * float64(time.Second))
				if age <= limit {
					continue
				}
				name := "?"
				for _, l := range m.GetLabel() {
					if l.GetName() == "name" {
						name = l.GetValue()
					}
				}
				stuck = append(stuck, fmt.Sprintf("%s (%s)", name, age.Round(time.Second)))
			}
		}
		if len(stuck) > 0 {
			sort.Strings(stuck)
			return fmt.Errorf("reconcile running longer than %s in %s", limit, strings.Join(stuck, ", "))
		}
		return nil
	}
}
