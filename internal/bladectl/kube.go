package bladectl

// The Kubernetes mode: with --node / --all-nodes / --selector, or as
// `kubectl blade`, commands act through the API server instead of the
// agent's gRPC API. Control is a merge patch of one Node annotation
// (docs/operations.md), status comes from the Blade object the agent keeps.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "github.com/kubeblade/kubeblade/api/agent/v1alpha1"
	"github.com/kubeblade/kubeblade/api/v1alpha1"
	"github.com/kubeblade/kubeblade/internal/version"
)

// FieldManager is the field manager bladectl's annotation patches are
// recorded under in the Node's managedFields.
const FieldManager = "bladectl"

// kubeOptions are the Kubernetes mode's flags and its lazily made client.
type kubeOptions struct {
	kubeconfig string
	context    string
	nodes      []string
	allNodes   bool
	selector   string

	once sync.Once
	conn *kubeConn
	err  error
}

var kubeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

func (o *options) addKubeFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringArrayVar(&o.kube.nodes, "node", nil, "work through the Kubernetes API on this node (repeatable)")
	f.BoolVar(&o.kube.allNodes, "all-nodes", false, "work through the Kubernetes API on every node that has a Blade")
	f.StringVarP(&o.kube.selector, "selector", "l", "", "work through the Kubernetes API on the nodes with these labels (e.g. kubeblade.io/soc=bcm2712)")
	f.StringVar(&o.kube.kubeconfig, "kubeconfig", "", "kubeconfig for the Kubernetes mode (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&o.kube.context, "context", "", "kubeconfig context for the Kubernetes mode")
	_ = root.RegisterFlagCompletionFunc("node", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		k, err := o.kubeConn()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names, err := k.bladeNames(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// kubeFlagsSet reports whether a Kubernetes-mode target flag was given.
func (o *options) kubeFlagsSet() bool {
	return len(o.kube.nodes) > 0 || o.kube.allNodes || o.kube.selector != ""
}

// kubeMode reports whether commands act through the Kubernetes API: when
// nodes are named, or by default as kubectl-blade unless blades are named.
func (o *options) kubeMode() bool {
	return o.kubeFlagsSet() || (o.kubectlPlugin() && !o.all && len(o.blades) == 0)
}

// nodeArgCommands are the commands that, in the Kubernetes mode, take node
// names as arguments after their own (`kubectl blade fan 40 NODE...`), with
// the number of their own arguments.
var nodeArgCommands = map[string]int{"status": 0, "monitor": 0, "identify": 0, "version": 0, "stealth": 1, "fan": 1}

// acceptNodeArgs lets the commands in nodeArgCommands take node names as
// arguments in the Kubernetes mode, which is how kubectl plugins are used.
// In the gRPC mode the commands validate their arguments as before.
func (o *options) acceptNodeArgs(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		own, ok := nodeArgCommands[cmd.Name()]
		if !ok || cmd.RunE == nil {
			continue
		}
		validate, run := cmd.Args, cmd.RunE
		cmd.Args = func(c *cobra.Command, args []string) error {
			kube := o.kubeMode()
			if kube && len(args) > own {
				args = args[:own]
			}
			if validate == nil {
				return nil
			}
			err := validate(c, args)
			if err != nil && !kube && len(args) > own {
				return usagef("%v (Kubernetes nodes are named with --node NAME)", err)
			}
			return err
		}
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if o.kubeMode() && len(args) > own {
				o.kube.nodes = append(o.kube.nodes, args[own:]...)
				args = args[:own]
			}
			// `kubectl blade version` without nodes has no blade to ask.
			if c.Name() == "version" && o.kubeMode() && !o.kubeFlagsSet() {
				if err := c.Flags().Set("client", "true"); err != nil {
					return err
				}
			}
			return run(c, args)
		}
	}
}

// checkKubeFlags refuses mixing the two modes' target flags.
func (o *options) checkKubeFlags() error {
	if o.kubeFlagsSet() && (o.all || len(o.blades) > 0) {
		return usagef("--blade/--all (gRPC) and --node/--all-nodes/--selector (Kubernetes) do not mix")
	}
	if o.kube.allNodes && o.kube.selector != "" {
		return usagef("use either --all-nodes or --selector")
	}
	return nil
}

// nodeTargets resolves --node, node arguments, --selector and --all-nodes
// to nodes, in the order given, each once.
func (o *options) nodeTargets(ctx context.Context) ([]target, error) {
	if err := o.checkKubeFlags(); err != nil {
		return nil, err
	}
	if !o.kubeFlagsSet() {
		return nil, usagef("which nodes? name them (%s NODE...), or use --all-nodes or --selector", o.commandName())
	}
	k, err := o.kubeConn()
	if err != nil {
		return nil, err
	}
	names, err := o.nodeNames(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([]target, len(names))
	for i, n := range names {
		out[i] = target{name: n, conn: k}
	}
	return out, nil
}

func (o *options) commandName() string {
	if o.kubectlPlugin() {
		return "kubectl blade COMMAND"
	}
	return "bladectl COMMAND --node"
}

// nodeNames lists the named nodes, then those the selector or --all-nodes
// find, without duplicates.
func (o *options) nodeNames(ctx context.Context, k *kubeConn) ([]string, error) {
	var names []string
	add := func(ns ...string) {
		for _, n := range ns {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	add(o.kube.nodes...)
	switch {
	case o.kube.selector != "":
		sel, err := labels.Parse(o.kube.selector)
		if err != nil {
			return nil, usagef("--selector %q: %v", o.kube.selector, err)
		}
		found, err := k.nodesMatching(ctx, sel)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("no node has the labels %s", sel)
		}
		add(found...)
	case o.kube.allNodes:
		found, err := k.bladeNames(ctx)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, errors.New("no Blade objects in the cluster: is the kubeblade agent running anywhere?")
		}
		add(found...)
	}
	return names, nil
}

// kubeConn makes the Kubernetes client once per run.
func (o *options) kubeConn() (*kubeConn, error) {
	o.kube.once.Do(func() { o.kube.conn, o.kube.err = o.newKubeConn() })
	return o.kube.conn, o.kube.err
}

// newKubeConn follows kubectl's rules: --kubeconfig, else $KUBECONFIG
// (a list), else ~/.kube/config, else the in-cluster service account;
// --context picks a context. The environment is read through Env so tests
// stay hermetic.
func (o *options) newKubeConn() (*kubeConn, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kube.kubeconfig}
	if v := o.env.Getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		rules.Precedence = filepath.SplitList(v)
	} else if home := o.env.Getenv("HOME"); home != "" {
		rules.Precedence = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.kube.context}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loader.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no Kubernetes configuration: use --kubeconfig, set KUBECONFIG, or create ~/.kube/config")
		}
		return nil, fmt.Errorf("kubeconfig: %v", err)
	}
	stderr := &lockedWriter{w: o.env.Stderr}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "bladectl/" + version.Get().Version
	cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
	// Many nodes at once: do not let client-side throttling serialise them.
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kubeScheme})
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client for %s: %v", cfg.Host, err)
	}
	context := o.kube.context
	if raw, err := loader.RawConfig(); err == nil && context == "" {
		context = raw.CurrentContext
	}
	return &kubeConn{c: c, host: cfg.Host, timeout: o.timeout, stderr: stderr, cfg: cfg, context: context}, nil
}

// lockedWriter serialises writes from concurrent per-node goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// kubeConn is the connector of the Kubernetes mode: one API client shared
// by all nodes.
type kubeConn struct {
	c       client.WithWatch
	host    string
	timeout time.Duration
	stderr  io.Writer
	// cfg and context (the kubeconfig context's name, if any) are for
	// commands that make their own clients, like dashboard.
	cfg     *rest.Config
	context string
}

func (k *kubeConn) Connect(node string) (bladeClient, error) {
	return &nodeClient{k: k, node: node}, nil
}

// request bounds one API request by --timeout, also inside open-ended
// commands (identify --wait, monitor), whose waiting is a watch.
func (k *kubeConn) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.timeout)
}

func metadataList(gvk string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	switch gvk {
	case "Node":
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	case "Blade":
		l.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BladeList"))
	}
	return l
}

// nodesMatching lists the names of the nodes with the labels (metadata
// only: full Node objects are large).
func (k *kubeConn) nodesMatching(ctx context.Context, sel labels.Selector) ([]string, error) {
	rctx, cancel := k.request(ctx)
	defer cancel()
	l := metadataList("Node")
	if err := k.c.List(rctx, l, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, k.explain(ctx, err)
	}
	return objectNames(l), nil
}

// bladeNames lists the names of all Blades, which are their nodes' names.
func (k *kubeConn) bladeNames(ctx context.Context) ([]string, error) {
	rctx, cancel := k.request(ctx)
	defer cancel()
	l := metadataList("Blade")
	if err := k.c.List(rctx, l); err != nil {
		return nil, k.explain(ctx, err)
	}
	return objectNames(l), nil
}

func objectNames(l *metav1.PartialObjectMetadataList) []string {
	names := make([]string, len(l.Items))
	for i, it := range l.Items {
		names[i] = it.Name
	}
	slices.Sort(names)
	return names
}

// getBlade reads a node's Blade; a missing one is explained by whether
// the node exists.
func (k *kubeConn) getBlade(ctx context.Context, node string) (*v1alpha1.Blade, error) {
	rctx, cancel := k.request(ctx)
	defer cancel()
	b := &v1alpha1.Blade{}
	err := k.c.Get(rctx, client.ObjectKey{Name: node}, b)
	if apierrors.IsNotFound(err) {
		return nil, k.noBlade(ctx, node)
	}
	if err != nil {
		return nil, k.explain(ctx, err)
	}
	return b, nil
}

func (k *kubeConn) noBlade(ctx context.Context, node string) error {
	rctx, cancel := k.request(ctx)
	defer cancel()
	err := k.c.Get(rctx, client.ObjectKey{Name: node}, &corev1.Node{})
	switch {
	case apierrors.IsNotFound(err):
		return nodeNotFound(node)
	case err != nil:
		return k.explain(ctx, err)
	}
	return fmt.Errorf("no Blade for node %q: is the kubeblade agent running there?", node)
}

func nodeNotFound(node string) error { return fmt.Errorf("node %q not found", node) }

// explain turns an API error into one sentence; ctx is the caller's, to
// tell its deadline from a single request's.
func (k *kubeConn) explain(ctx context.Context, err error) error {
	var st apierrors.APIStatus
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return errors.New("interrupted")
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from the Kubernetes API at %s within %s", k.host, k.timeout)
	case apierrors.IsForbidden(err):
		detail := msg
		if i := strings.Index(detail, "is forbidden: "); i >= 0 {
			detail = detail[i+len("is forbidden: "):]
		}
		return fmt.Errorf("forbidden: %s (bladectl needs get, list, watch and patch on nodes and get, list, watch on blades.kubeblade.io)", detail)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the Kubernetes API at %s did not accept your credentials: check the user in your kubeconfig", k.host)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("the Kubernetes API at %s has no Blade resource (kubeblade.io/v1alpha1): is kubeblade installed in this cluster?", k.host)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		return fmt.Errorf("TLS with the Kubernetes API at %s failed: %s — check the cluster's certificate-authority in your kubeconfig", k.host, tlsDetail(msg))
	case isConnectionError(msg):
		return fmt.Errorf("cannot reach the Kubernetes API at %s: %s", k.host, innermost(msg))
	case errors.As(err, &st):
		return fmt.Errorf("the Kubernetes API refused: %s", st.Status().Message)
	}
	return err
}

func isConnectionError(msg string) bool {
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "network is unreachable",
		"no route to host", "connection reset", "EOF", "dial tcp"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// innermost keeps the last cause of a chain like
// `Get "https://…": dial tcp 127.0.0.1:1: connect: connection refused`.
func innermost(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return strings.Trim(msg[i+2:], `"`)
	}
	return msg
}

// nodeClient is one node in the Kubernetes mode.
type nodeClient struct {
	k    *kubeConn
	node string
}

func (n *nodeClient) Address() string { return "the Kubernetes API at " + n.k.host }
func (n *nodeClient) Close() error    { return nil }

func (n *nodeClient) Status(ctx context.Context) (*agentv1.Status, error) {
	b, err := n.k.getBlade(ctx, n.node)
	if err != nil {
		return nil, err
	}
	return statusFromBlade(b), nil
}

// annotate sets (or, with nil, removes) one annotation by a JSON merge
// patch of metadata.annotations alone, so nothing else on the Node — not
// even other annotations — can be overwritten by a stale read.
func (n *nodeClient) annotate(ctx context.Context, key string, value *string) (*corev1.Node, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{key: value}}})
	if err != nil {
		return nil, err
	}
	rctx, cancel := n.k.request(ctx)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.node}}
	err = n.k.c.Patch(rctx, node, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	if apierrors.IsNotFound(err) {
		return nil, nodeNotFound(n.node)
	}
	if err != nil {
		return nil, n.k.explain(ctx, err)
	}
	n.warnWithoutBlade(ctx)
	return node, nil
}

// warnWithoutBlade says so when no agent will read the annotation just
// written: it is kept, and takes effect once an agent runs there.
func (n *nodeClient) warnWithoutBlade(ctx context.Context) {
	rctx, cancel := n.k.request(ctx)
	defer cancel()
	err := n.k.c.Get(rctx, client.ObjectKey{Name: n.node}, &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Blade"}})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(n.k.stderr, "%s: warning: node has no Blade, so no kubeblade agent is acting on the annotation yet\n", n.node)
	}
}

func ptr(s string) *string { return &s }

func (n *nodeClient) SetIdentify(ctx context.Context, on, wait bool) (*agentv1.Status, error) {
	node, err := n.annotate(ctx, v1alpha1.AnnotationIdentify, ptr(strconv.FormatBool(on)))
	if err != nil || !wait {
		return nil, err
	}
	return nil, n.waitIdentify(ctx, node.ResourceVersion)
}

// waitIdentify watches the Node until the agent removes the identify
// annotation, which it does when the blade's button confirms.
func (n *nodeClient) waitIdentify(ctx context.Context, fromVersion string) error {
	confirmed := errors.New("confirmed")
	err := n.k.watchFrom(ctx, &corev1.NodeList{}, n.node, fromVersion, func(obj client.Object) error {
		v, ok := obj.GetAnnotations()[v1alpha1.AnnotationIdentify]
		switch {
		case !ok:
			return confirmed
		case v != "true":
			return fmt.Errorf("identify was stopped (%s=%s) before the button confirmed it", v1alpha1.AnnotationIdentify, v)
		}
		return nil
	})
	switch {
	case errors.Is(err, confirmed):
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("identify not confirmed within %s; %s=true stays set until someone presses the button (or run identify --off)",
			n.k.timeout, v1alpha1.AnnotationIdentify)
	case errors.Is(err, errDeleted):
		return fmt.Errorf("node %q was deleted", n.node)
	}
	return err
}

// errDeleted ends a watch whose object was deleted.
var errDeleted = errors.New("deleted")

// relistDelay spaces the reads that resume a watch the server closed.
const relistDelay = 500 * time.Millisecond

// errRelist asks watchFrom for a fresh read: the watch ended or its
// resource version expired.
var errRelist = errors.New("relist")

// watchFrom hands each change of the named object after resourceVersion
// to each, until each returns an error (which watchFrom returns) or ctx
// ends. Watches that the server closes — they time out, or their resource
// version expires — are resumed after a fresh read, so no change is missed.
func (k *kubeConn) watchFrom(ctx context.Context, list client.ObjectList, name, resourceVersion string,
	each func(client.Object) error) error {
	for {
		err := k.watchOnce(ctx, list, name, resourceVersion, each)
		if !errors.Is(err, errRelist) {
			return err
		}
		// A server that keeps closing watches at once is not hammered.
		select {
		case <-ctx.Done():
			return k.explain(ctx, ctx.Err())
		case <-time.After(relistDelay):
		}
		obj, err := k.getFor(ctx, list, name)
		if err != nil {
			return err
		}
		if err := each(obj); err != nil {
			return err
		}
		resourceVersion = obj.GetResourceVersion()
	}
}

func (k *kubeConn) watchOnce(ctx context.Context, list client.ObjectList, name, resourceVersion string,
	each func(client.Object) error) error {
	w, err := k.c.Watch(ctx, list, &client.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
		Raw:           &metav1.ListOptions{ResourceVersion: resourceVersion, AllowWatchBookmarks: true},
	})
	if err != nil {
		return k.explain(ctx, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return k.explain(ctx, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errRelist
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if obj, ok := ev.Object.(client.Object); ok {
					if err := each(obj); err != nil {
						return err
					}
				}
			case watch.Deleted:
				return errDeleted
			case watch.Error:
				return errRelist
			}
		}
	}
}

// getFor reads the object a list type holds: a Node or a Blade.
func (k *kubeConn) getFor(ctx context.Context, list client.ObjectList, name string) (client.Object, error) {
	switch list.(type) {
	case *v1alpha1.BladeList:
		return k.getBlade(ctx, name)
	default:
		rctx, cancel := k.request(ctx)
		defer cancel()
		node := &corev1.Node{}
		err := k.c.Get(rctx, client.ObjectKey{Name: name}, node)
		if apierrors.IsNotFound(err) {
			return nil, errDeleted
		}
		if err != nil {
			return nil, k.explain(ctx, err)
		}
		return node, nil
	}
}

func (n *nodeClient) SetStealth(ctx context.Context, mode agentv1.StealthMode) (*agentv1.Status, error) {
	var v *string // clear: back to the configured mode
	switch mode {
	case agentv1.StealthMode_STEALTH_MODE_ON:
		v = ptr("true")
	case agentv1.StealthMode_STEALTH_MODE_OFF:
		v = ptr("false")
	}
	_, err := n.annotate(ctx, v1alpha1.AnnotationStealth, v)
	return nil, err
}

func (n *nodeClient) SetFan(ctx context.Context, percent *uint32) (*agentv1.Status, error) {
	v := "auto"
	if percent != nil {
		if *percent > 100 {
			return nil, fmt.Errorf("fan %d: want auto or a percent from 0 to 100", *percent)
		}
		v = strconv.FormatUint(uint64(*percent), 10)
	}
	_, err := n.annotate(ctx, v1alpha1.AnnotationFanSpeed, &v)
	return nil, err
}

// errLEDNoAnnotation: LED colours are set only through the agent's API.
var errLEDNoAnnotation = errors.New("LED colours cannot be set through the Kubernetes API (there is no Node annotation for them): use --blade or --all")

// SetLEDColor is refused: there is no LED annotation (docs/operations.md). The led command
// says so before connecting; this keeps nodeClient a whole bladeClient.
func (n *nodeClient) SetLEDColor(context.Context, agentv1.LED, *agentv1.Color) (*agentv1.Status, error) {
	return nil, errLEDNoAnnotation
}

// Watch reports the Blade now and on every change the agent writes.
func (n *nodeClient) Watch(ctx context.Context, each func(*agentv1.WatchStatusResponse) error) error {
	b, err := n.k.getBlade(ctx, n.node)
	if err != nil {
		return err
	}
	last := b.ResourceVersion
	if err := each(&agentv1.WatchStatusResponse{Status: statusFromBlade(b)}); err != nil {
		return err
	}
	err = n.k.watchFrom(ctx, &v1alpha1.BladeList{}, n.node, last, func(obj client.Object) error {
		b, ok := obj.(*v1alpha1.Blade)
		if !ok || b.ResourceVersion == last { // a resumed watch re-reads what was shown
			return nil
		}
		last = b.ResourceVersion
		return each(&agentv1.WatchStatusResponse{Status: statusFromBlade(b)})
	})
	if errors.Is(err, errDeleted) {
		return fmt.Errorf("the Blade for node %q was deleted", n.node)
	}
	return err
}

var fanModes = map[string]agentv1.FanMode{
	"auto": agentv1.FanMode_FAN_MODE_AUTO, "manual": agentv1.FanMode_FAN_MODE_MANUAL, "critical": agentv1.FanMode_FAN_MODE_CRITICAL,
}

var ledPatterns = map[string]agentv1.LEDPattern{
	"off": agentv1.LEDPattern_LED_PATTERN_OFF, "steady": agentv1.LEDPattern_LED_PATTERN_STEADY, "blink": agentv1.LEDPattern_LED_PATTERN_BLINK,
}

// statusFromBlade gives a Blade's status the gRPC status's shape, so both
// modes print the same status, monitor and version output.
func statusFromBlade(b *v1alpha1.Blade) *agentv1.Status {
	s := &b.Status
	st := &agentv1.Status{
		Running:          s.State != v1alpha1.BladeStateStopped,
		FanPercent:       uint32(max(0, s.Fan.Percent)),
		FanMode:          fanModes[s.Fan.Mode],
		FanStalled:       s.Fan.Stalled,
		Critical:         s.Critical,
		Identify:         s.Identify,
		Stealth:          s.Stealth,
		StealthRequested: s.Stealth,
		PowerSource:      s.PowerSource,
		Hardware: &agentv1.HardwareInfo{
			Backend:             s.HardwareBackend,
			IsBlade:             s.State != v1alpha1.BladeStateNotABlade,
			Soc:                 s.SoC,
			FanUnit:             s.FanUnit,
			Capabilities:        s.Capabilities,
			MissingCapabilities: s.MissingCapabilities,
			Detail:              s.HardwareDetail,
		},
		Version: &agentv1.VersionInfo{Version: s.AgentVersion},
	}
	if s.TemperatureCelsius != nil {
		t := float64(*s.TemperatureCelsius)
		st.TemperatureCelsius = &t
	}
	if s.AirflowTemperatureCelsius != nil {
		t := float64(*s.AirflowTemperatureCelsius)
		st.AirflowCelsius = &t
	}
	if s.Fan.RPM != nil {
		r := float64(*s.Fan.RPM)
		st.FanRpm = &r
	}
	if s.Config != nil {
		st.ConfigName = s.Config.Name
	}
	if s.HeartbeatTime != nil {
		st.UpdatedAt = timestamppb.New(s.HeartbeatTime.Time)
	}
	for _, l := range []struct {
		led agentv1.LED
		s   v1alpha1.LEDStatus
	}{{agentv1.LED_LED_TOP, s.LEDs.Top}, {agentv1.LED_LED_EDGE, s.LEDs.Edge}} {
		if l.s.Color == "" && l.s.Pattern == "" {
			continue
		}
		c := parseColor(l.s.Color)
		if c == nil && l.s.Color == "" && l.s.Pattern == "off" {
			c = &agentv1.Color{} // an LED that is off shows no light
		}
		st.Leds = append(st.Leds, &agentv1.LEDStatus{Led: l.led, Pattern: ledPatterns[l.s.Pattern], Color: c})
	}
	return st
}

// parseColor reads #rrggbb. Anything else is nil, which prints as
// unknown: a Blade status written by a broken or newer agent must not show
// as black (or any colour the LED is not showing).
func parseColor(s string) *agentv1.Color {
	if len(s) != 7 || s[0] != '#' {
		return nil
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return nil
	}
	return &agentv1.Color{Red: uint32(v>>16) & 0xff, Green: uint32(v>>8) & 0xff, Blue: uint32(v) & 0xff}
}
