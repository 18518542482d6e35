package kubeagent

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objectWatch keeps the latest copy of one named object, watched with a
// metadata.name field selector so the API server sends this object's
// changes and nothing else: the agent's cost does not grow with the cluster.
type objectWatch struct {
	informer toolscache.SharedIndexInformer
	changed  chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
}

func newObjectWatch(ctx context.Context, c client.WithWatch, obj client.Object, list client.ObjectList, name string) *objectWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return l, c.List(ctx, l, &client.ListOptions{FieldSelector: sel, Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return c.Watch(ctx, l, &client.ListOptions{FieldSelector: sel, Raw: &o})
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
	w := &objectWatch{informer: inf, changed: make(chan struct{}, 1), done: make(chan struct{})}
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default: // a notification is pending; the reader gets the latest copy
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		inf.RunWithContext(ctx)
	}()
	return w
}

// get returns the current copy, or nil if the object does not exist (or
// was not listed yet).
func (w *objectWatch) get() client.Object {
	items := w.informer.GetStore().List()
	if len(items) == 0 {
		return nil
	}
	return items[0].(client.Object)
}

// synced reports whether the first list arrived.
func (w *objectWatch) synced() bool { return w.informer.HasSynced() }

func (w *objectWatch) stop() {
	w.cancel()
	<-w.done
}

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
