// Package kubeclient is the agent's Kubernetes client: typed clients for
// exactly the kinds the agent reads and writes (Nodes, events.k8s.io Events,
// CertificateSigningRequests, Blades, BladeConfigs), built from client-go's
// rest and gentype packages.
//
// It exists for the agent's footprint. client-go's clientset, its typed
// clients, its events recorder and controller-runtime's client all import
// client-go's kubernetes/scheme, which registers every built-in API group
// and so links all of k8s.io/api into the binary: about half the agent's
// machine code and a third of its memory (docs/performance.md). This package
// registers only what the agent uses. The operator and bladectl keep the
// usual clients.
package kubeclient

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	kbv1 "github.com/kubeblade/kubeblade/api/v1alpha1"
)

// Typed clients of the kinds the agent touches.
type (
	NodeClient        = gentype.ClientWithList[*corev1.Node, *corev1.NodeList]
	EventClient       = gentype.ClientWithList[*eventsv1.Event, *eventsv1.EventList]
	CSRClient         = gentype.ClientWithList[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList]
	BladeClient       = gentype.ClientWithList[*kbv1.Blade, *kbv1.BladeList]
	BladeConfigClient = gentype.ClientWithList[*kbv1.BladeConfig, *kbv1.BladeConfigList]
)

// Clientset holds the agent's typed clients. They share one HTTP client
// (one connection pool) and, when the config sets QPS, one client-side rate
// limiter; without QPS each group gets client-go's default limiter, as with
// client-go's clientset.
type Clientset struct {
	Nodes        *NodeClient
	CSRs         *CSRClient
	Blades       *BladeClient
	BladeConfigs *BladeConfigClient

	events rest.Interface
	params runtime.ParameterCodec
}

// Events returns the Events client for namespace (Events about cluster-scoped
// objects such as Nodes live in "default").
func (c *Clientset) Events(namespace string) *EventClient {
	return gentype.NewClientWithList[*eventsv1.Event, *eventsv1.EventList]("events", c.events, c.params, namespace,
		func() *eventsv1.Event { return &eventsv1.Event{} }, func() *eventsv1.EventList { return &eventsv1.EventList{} })
}

// Scheme returns a scheme with the agent's kinds and nothing else.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, eventsv1.AddToScheme, certificatesv1.AddToScheme, kbv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			// Registration of generated types cannot fail but by a
			// programming error (a kind registered twice differently).
			panic(err)
		}
	}
	return s
}

// New returns the clients for cfg.
func New(cfg *rest.Config) (*Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client: burst must be positive when QPS is set")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	scheme := Scheme()
	codecs := serializer.NewCodecFactory(scheme)
	params := runtime.NewParameterCodec(scheme)
	group := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		c.NegotiatedSerializer = codecs.WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(c, hc)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
		}
		return rc, nil
	}
	core, err := group(corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	events, err := group(eventsv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	certs, err := group(certificatesv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	kb, err := group(kbv1.GroupVersion)
	if err != nil {
		return nil, err
	}
	return &Clientset{
		Nodes: gentype.NewClientWithList[*corev1.Node, *corev1.NodeList]("nodes", core, params, "",
			func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} }),
		CSRs: gentype.NewClientWithList[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList]("certificatesigningrequests", certs, params, "",
			func() *certificatesv1.CertificateSigningRequest { return &certificatesv1.CertificateSigningRequest{} },
			func() *certificatesv1.CertificateSigningRequestList {
				return &certificatesv1.CertificateSigningRequestList{}
			}),
		Blades: gentype.NewClientWithList[*kbv1.Blade, *kbv1.BladeList]("blades", kb, params, "",
			func() *kbv1.Blade { return &kbv1.Blade{} }, func() *kbv1.BladeList { return &kbv1.BladeList{} }),
		BladeConfigs: gentype.NewClientWithList[*kbv1.BladeConfig, *kbv1.BladeConfigList]("bladeconfigs", kb, params, "",
			func() *kbv1.BladeConfig { return &kbv1.BladeConfig{} }, func() *kbv1.BladeConfigList { return &kbv1.BladeConfigList{} }),
		events: events,
		params: params,
	}, nil
}

// ListerWatcher lists and watches one kind: the typed clients here do, and
// so do client-go's.
type ListerWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ListWatchNamed lists and watches only the object called name, with a
// metadata.name field selector: the API server sends that object's changes
// and nothing else, so the agent's cost does not grow with the cluster.
func ListWatchNamed[L runtime.Object](c ListerWatcher[L], name string) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Watch(ctx, o)
		},
	}
}
