package bladectl

// bladectl dashboard: the rack view (docs/dashboard.md), served from this machine
// with the caller's own kubeconfig. The server lives in internal/dashboard;
// this is its command line.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeblade/kubeblade/internal/dashboard"
)

type dashboardFlags struct {
	listen   string
	explicit bool // --listen was given
	open     bool
	hosts    []string
}

func newDashboardCmd(o *options) *cobra.Command {
	var f dashboardFlags
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a live rack view of the cluster's blades in your browser",
		Long: `dashboard serves a web page that draws the cluster's blades as racks
(grouped by the Node labels kubeblade.io/chassis and kubeblade.io/slot, the
others in a pool) with their LEDs, temperature, fan, power, state and
config, updated live through watches. Clicking a blade toggles identify.

It runs here, with your kubeconfig and context (--kubeconfig, --context):
nothing is installed in the cluster, and the page can do what you can do.
So it listens on 127.0.0.1 by default; another address must be given
with --listen explicitly, and it warns that others can then use the page
with your credentials (name the host they use with --allow-host).`,
		Example: `  bladectl dashboard --open
  kubectl blade dashboard --context rack-1 --listen 127.0.0.1:9000
  bladectl dashboard --listen 0.0.0.0:8080 --allow-host wallscreen.local`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.explicit = cmd.Flags().Changed("listen")
			return o.dashboard(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", dashboard.DefaultListen, "address to serve the page on (loopback unless given explicitly)")
	fl.BoolVar(&f.open, "open", false, "open the page in the desktop's browser")
	fl.StringArrayVar(&f.hosts, "allow-host", nil, "a host name the page may be opened by besides IP addresses and localhost (repeatable)")
	return cmd
}

func (o *options) dashboard(ctx context.Context, f dashboardFlags) error {
	if o.all || len(o.blades) > 0 || o.kubeFlagsSet() {
		return usagef("dashboard shows every blade of the cluster: --blade, --all, --node, --all-nodes and --selector do not apply (use the page's filter)")
	}
	exposed, err := dashboard.CheckListen(f.listen, f.explicit)
	if err != nil {
		return usageError{err}
	}
	// controller-runtime's client has a process-wide logger that complains
	// on stderr, with a stack, when a long-running program never set it.
	// The dashboard reports its problems itself.
	ctrllog.SetLogger(logr.Discard())
	k, err := o.kubeConn()
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(k.cfg)
	// Three long-running watches and a patch now and then; the warnings
	// writer and user agent come with k.cfg.
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: dashboard.Scheme()})
	if err != nil {
		return fmt.Errorf("Kubernetes client for %s: %v", cfg.Host, err)
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("cannot serve on %s: the address is in use; pick another with --listen (e.g. --listen 127.0.0.1:0 for any free port)", f.listen)
		}
		return fmt.Errorf("cannot serve on %s: %v", f.listen, err)
	}
	defer ln.Close()

	hub := dashboard.NewHub(dashboard.HubOptions{})
	hub.SetServer(k.host, k.context)
	var printMu sync.Mutex
	failing := map[string]bool{}
	src := &dashboard.Source{Client: c, Hub: hub, Server: k.host,
		Explain: func(err error) error { return k.explain(ctx, err) },
		// Problems are printed as they start and end; the page shows them too.
		Changed: func(s dashboard.KindStatus) {
			printMu.Lock()
			defer printMu.Unlock()
			if s.OK {
				if failing[s.Kind] {
					fmt.Fprintf(o.env.Stderr, "dashboard: watching %s again\n", s.Kind)
				}
				failing[s.Kind] = false
				return
			}
			failing[s.Kind] = true
			fmt.Fprintf(o.env.Stderr, "error: %s: %s (shown on the page too; retrying)\n", s.Kind, s.Message)
		}}
	hosts := f.hosts
	if exposed {
		if h, err := os.Hostname(); err == nil {
			hosts = append(hosts, h, h+".local")
		}
	}
	srv, err := dashboard.NewServer(dashboard.Options{Hub: hub, Identify: src, Hosts: hosts})
	if err != nil {
		return err
	}

	url := pageURL(ln.Addr())
	where := k.host
	if k.context != "" {
		where = k.context + " (" + k.host + ")"
	}
	printMu.Lock()
	if exposed {
		fmt.Fprintln(o.env.Stderr, dashboard.ExposedWarning(ln.Addr().String()))
	}
	fmt.Fprintf(o.env.Stdout, "Rack view of %s at %s — Ctrl-C stops it\n", where, url)
	printMu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx.Done()) })
	wg.Go(func() { src.Run(ctx) })
	if f.open {
		openBrowser(url, o.env.Stderr)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second,
		// Streams end with the command, so shutting down does not wait
		// for open pages.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the dashboard: %v", err)
	}
	return nil
}

// pageURL is the address to open: a wildcard listener is opened on
// loopback.
func pageURL(a net.Addr) string {
	host, port, _ := net.SplitHostPort(a.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

func openBrowser(url string, stderr interface{ Write([]byte) (int, error) }) {
	name, args := dashboard.OpenCommand(runtime.GOOS, url)
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "could not open a browser (%s: %v): open %s yourself\n", strings.Join(append([]string{name}, args...), " "), err, url)
		return
	}
	go func() { _ = cmd.Wait() }()
}
