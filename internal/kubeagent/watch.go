package kubeagent

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeblade/kubeblade/internal/kubeclient"
)

// objectWatch keeps the latest copy of one named object
// (kubeclient.ListWatchNamed).
type objectWatch struct {
	informer toolscache.SharedIndexInformer
	changed  chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
}

// newObjectWatch lists and watches the object name. first, when not nil,
// is a list of it the agent already made (Initial): the watch starts from
// it, at its resourceVersion, rather than listing again; a later relist
// (after the watch fell too far behind) asks the API server. delivered,
// when not nil, is called with each new copy as it arrives, on the
// watch's own goroutine, before the reader is told.
func newObjectWatch[L runtime.Object](ctx context.Context, c kubeclient.ListerWatcher[L], obj runtime.Object, name string, first runtime.Object, delivered func(any)) *objectWatch {
	// A plain list (resourceVersion 0, served from the API server's watch
	// cache as it stands) and then a watch from it, not client-go's
	// default streaming list: that one asks for a consistent initial
	// state and so waits until the watch cache has caught up with etcd.
	// When a whole rack starts at once the cache trails etcd by seconds,
	// and every agent's first copy of its Node and BladeConfig waited for
	// it (2.4-3.5 s per watch for 1 000 agents against 0.7 s listed,
	// docs/performance.md). A list that is slightly behind is caught up by
	// the watch that follows it, as informers always did.
	named := kubeclient.ListWatchNamed(c, name)
	if first != nil {
		list := named.ListWithContextFunc
		var used atomic.Bool
		named.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if used.CompareAndSwap(false, true) {
				return first, nil
			}
			return list(ctx, o)
		}
	}
	// Each watch asks to last as long as the API server's own default
	// for a watch that names no timeout (--min-request-timeout, 1800 s,
	// times 1 to 2), not the 5 to 10 min client-go's reflector asks for
	// (k8s.io/client-go/tools/cache/reflector.go, v0.37.2): every renewal
	// is one more request, and at 5 to 10 min the agent's two watches
	// cost it more requests than its heartbeat (docs/performance.md). A
	// dead connection is still noticed within a minute by client-go's
	// HTTP/2 health check, and bookmarks keep the resourceVersion the
	// watch resumes from recent.
	watchFn := named.WatchFuncWithContext
	named.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		t := int64(watchTimeout.Seconds() * (1 + rand.Float64()))
		o.TimeoutSeconds = &t
		return watchFn(ctx, o)
	}
	lw := toolscache.ToListWatcherWithWatchListSemantics(named, noWatchList{})
	inf := toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
	w := &objectWatch{informer: inf, changed: make(chan struct{}, 1), done: make(chan struct{})}
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default: // a notification is pending; the reader gets the latest copy
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if delivered != nil {
				delivered(o)
			}
			notify()
		},
		UpdateFunc: func(_, o any) {
			if delivered != nil {
				delivered(o)
			}
			notify()
		},
		DeleteFunc: func(any) { notify() },
	})
	ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		inf.RunWithContext(ctx)
	}()
	// An empty first list raises no handler, yet "it does not exist" is
	// news too (a fan peer without a Blade): say so once synced.
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			notify()
		}
	}()
	return w
}

// get returns the current copy, or nil if the object does not exist (or
// was not listed yet).
func (w *objectWatch) get() runtime.Object {
	items := w.informer.GetStore().List()
	if len(items) == 0 {
		return nil
	}
	return items[0].(runtime.Object)
}

// synced reports whether the first list arrived.
func (w *objectWatch) synced() bool { return w.informer.HasSynced() }

func (w *objectWatch) stop() {
	w.cancel()
	<-w.done
}

// watchTimeout is the shortest time a watch asks to last: kube-apiserver's
// --min-request-timeout default (k8s.io/apiserver/pkg/server/config.go).
const watchTimeout = 1800 * time.Second

// stopAll stops watches in parallel.
func stopAll(ws ...*objectWatch) {
	var wg sync.WaitGroup
	for _, w := range ws {
		if w == nil {
			continue
		}
		wg.Add(1)
		go func(w *objectWatch) {
			defer wg.Done()
			w.stop()
		}(w)
	}
	wg.Wait()
}

// noWatchList tells client-go's reflector not to stream the initial list.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
