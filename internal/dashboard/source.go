package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeblade/kubeblade/api/v1alpha1"
)

// FieldManager records the dashboard's identify patches in the Node's
// managedFields, as bladectl's own.
const FieldManager = "bladectl"

// EventsNamespace is where Events about cluster-scoped objects such as
// Nodes are written (client-go's recorders, and kubeblade's agent, use it).
const EventsNamespace = metav1.NamespaceDefault

// Scheme holds the kinds the dashboard reads.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(eventsv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Source watches Blades, Nodes and Events with one informer each and feeds
// a Hub. It also makes the one change the page can ask for: identify.
type Source struct {
	// Client must know the kinds of Scheme.
	Client client.WithWatch
	Hub    *Hub
	// Server is the API server's address, for messages.
	Server string
	// Explain turns other API errors (connection, TLS, credentials) into
	// a sentence; nil keeps them as they are.
	Explain func(error) error
	// Changed is told when a kind's watch starts failing or recovers.
	Changed func(KindStatus)
}

// Run watches until ctx ends.
func (s *Source) Run(ctx context.Context) {
	// The reflectors log every failed list at warning level through klog;
	// the failures reach the page and the command line through Changed
	// instead, explained.
	ctx = klog.NewContext(ctx, logr.Discard())
	blades := s.informer(KindBlades, &v1alpha1.Blade{}, func() client.ObjectList { return &v1alpha1.BladeList{} }, "", "",
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.Hub.SetBlade(o.(*v1alpha1.Blade)) },
			UpdateFunc: func(_, o any) { s.Hub.SetBlade(o.(*v1alpha1.Blade)) },
			DeleteFunc: func(o any) { s.Hub.DeleteBlade(deletedName(o)) },
		}, func(o any) (any, error) {
			if b, ok := o.(*v1alpha1.Blade); ok {
				b.ManagedFields = nil
			}
			return o, nil
		})
	nodes := s.informer(KindNodes, &corev1.Node{}, func() client.ObjectList { return &corev1.NodeList{} }, "", "",
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.Hub.SetNode(o.(*corev1.Node)) },
			UpdateFunc: func(_, o any) { s.Hub.SetNode(o.(*corev1.Node)) },
			DeleteFunc: func(o any) { s.Hub.DeleteNode(deletedName(o)) },
		}, func(o any) (any, error) {
			if n, ok := o.(*corev1.Node); ok {
				return slimNode(n), nil
			}
			return o, nil
		})
	events := s.informer(KindEvents, &eventsv1.Event{}, func() client.ObjectList { return &eventsv1.EventList{} },
		EventsNamespace, "regarding.kind=Node",
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.Hub.SetEvent(o.(*eventsv1.Event)) },
			UpdateFunc: func(_, o any) { s.Hub.SetEvent(o.(*eventsv1.Event)) },
			DeleteFunc: func(o any) {
				if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				if e, ok := o.(*eventsv1.Event); ok {
					s.Hub.DeleteEvent(e)
				}
			},
		}, func(o any) (any, error) {
			if e, ok := o.(*eventsv1.Event); ok {
				e.ManagedFields = nil
			}
			return o, nil
		})
	done := make(chan struct{})
	for _, c := range []cache.Controller{blades, nodes, events} {
		go func() {
			c.RunWithContext(ctx)
			done <- struct{}{}
		}()
	}
	if cache.WaitForCacheSync(ctx.Done(), blades.HasSynced, nodes.HasSynced) {
		s.Hub.SetSynced()
	}
	for range 3 {
		<-done
	}
}

func (s *Source) informer(kind string, obj runtime.Object, list func() client.ObjectList, namespace, fieldSelector string,
	h cache.ResourceEventHandler, transform cache.TransformFunc) cache.Controller {
	options := func(o metav1.ListOptions) *client.ListOptions {
		if fieldSelector != "" {
			o.FieldSelector = fieldSelector
		}
		return &client.ListOptions{Namespace: namespace, Raw: &o}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := list()
			err := s.Client.List(ctx, l, options(o))
			s.report(ctx, kind, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := s.Client.Watch(ctx, list(), options(o))
			s.report(ctx, kind, err)
			return w, err
		},
	}
	_, c := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: obj, Handler: h, Transform: transform,
	})
	return c
}

// report records the outcome of a list or watch request.
func (s *Source) report(ctx context.Context, kind string, err error) {
	if ctx.Err() != nil {
		return // shutting down
	}
	st := KindStatus{Kind: kind, OK: true}
	if err != nil {
		st = s.Problem(kind, err)
	}
	if s.Hub.SetKind(st) && s.Changed != nil {
		s.Changed(st)
	}
}

var resourceNames = map[string]string{
	KindBlades: "blades.kubeblade.io", KindNodes: "nodes", KindEvents: "events.k8s.io events in namespace " + EventsNamespace,
}

// Problem explains why a kind cannot be watched, in words a person can
// act on.
func (s *Source) Problem(kind string, err error) KindStatus {
	switch {
	case apierrors.IsForbidden(err):
		return KindStatus{Kind: kind, Problem: ProblemForbidden, Message: fmt.Sprintf(
			"no permission to list and watch %s (%s). The dashboard acts with your own credentials and needs "+
				"get, list and watch on blades.kubeblade.io and nodes, list and watch on events.k8s.io events in namespace %s, "+
				"and patch on nodes for identify: ask your cluster admin for them, or use another --context",
			resourceNames[kind], forbiddenDetail(err), EventsNamespace)}
	case kind == KindBlades && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err)):
		return KindStatus{Kind: kind, Problem: ProblemNotInstalled, Message: fmt.Sprintf(
			"the Kubernetes API at %s has no Blade resource (blades.kubeblade.io/v1alpha1): kubeblade is not installed "+
				"in this cluster. Install it (its CRDs and operator), or pick the right cluster with --context", s.Server)}
	}
	if s.Explain != nil {
		err = s.Explain(err)
	}
	return KindStatus{Kind: kind, Problem: ProblemUnreachable, Message: err.Error()}
}

// forbiddenDetail keeps the API server's reason from a Forbidden error
// without the request's boilerplate.
func forbiddenDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "is forbidden: "); i >= 0 {
		msg = msg[i+len("is forbidden: "):]
	}
	return msg
}

func deletedName(o any) string {
	key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(o)
	return key
}

// ErrNodeNotFound is returned by SetIdentify for a Node that is not there.
var ErrNodeNotFound = errors.New("node not found")

// SetIdentify starts or stops identify on a blade by setting its Node's
// kubeblade.io/identify annotation (docs/operations.md), with a merge patch of that
// one key so nothing else on the Node can be overwritten.
func (s *Source) SetIdentify(ctx context.Context, node string, on bool) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{v1alpha1.AnnotationIdentify: strconv.FormatBool(on)}}})
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	err = s.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %s", ErrNodeNotFound, node)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("no permission to change node %s (%s): identify needs patch on nodes", node, forbiddenDetail(err))
	case s.Explain != nil:
		return s.Explain(err)
	}
	return err
}
