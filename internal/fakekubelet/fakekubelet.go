// Package fakekubelet stands in for the kubelet of Nodes that have no machine
// behind them (the demo's and the end-to-end tests' simulated blades): it
// registers the Nodes, keeps their Ready condition and Lease fresh, reports
// the pods bound to them as running and ready, and finishes the deletion of
// their terminating pods. It runs no containers. It does what KWOK does for
// kubeblade's needs without another multi-minute build from source.
package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Name is the fake kubelet's field manager and Event source.
const Name = "kubeblade-fakekubelet"

// Options configure Run.
type Options struct {
	Client kubernetes.Interface
	// Nodes are the Node names this kubelet plays; missing Nodes are
	// created.
	Nodes []string
	// Labels go on Nodes it creates, beside kubernetes.io/hostname, os and
	// arch (arm64, like a blade).
	Labels map[string]string
	// Heartbeat is how often the Ready condition and the Lease are renewed
	// (default 10 s, the kubelet's own).
	Heartbeat time.Duration
	Clock     clock.WithTicker
	Logger    *slog.Logger
}

// Run registers the Nodes and plays their kubelet until ctx ends. It returns
// once the Nodes are registered and Ready when ready is non-nil (closing it).
func Run(ctx context.Context, o Options, ready chan<- struct{}) error {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	k := &kubelet{o: o, nodes: map[string]types.UID{}}
	for _, n := range o.Nodes {
		if err := k.register(ctx, n); err != nil {
			return err
		}
	}
	if err := k.heartbeat(ctx); err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(o.Client, 0)
	pods := factory.Core().V1().Pods()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && slices.Contains(o.Nodes, p.Spec.NodeName) {
			q.Add(p.Namespace + "/" + p.Name)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return ctx.Err()
	}
	if ready != nil {
		close(ready)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			key, quit := q.Get()
			if quit {
				return
			}
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			p, err := pods.Lister().Pods(ns).Get(name)
			if err == nil {
				err = k.syncPod(ctx, p)
			}
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				o.Logger.Debug("pod sync failed; retrying", "pod", key, "err", err)
				q.AddRateLimited(key)
			} else {
				q.Forget(key)
			}
			q.Done(key)
		}
	})

	t := o.Clock.NewTicker(o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.ShutDown()
			return nil
		case <-t.C():
			if err := k.heartbeat(ctx); err != nil && ctx.Err() == nil {
				o.Logger.Warn("node heartbeat failed", "err", err)
			}
		}
	}
}

type kubelet struct {
	o     Options
	nodes map[string]types.UID
}

func (k *kubelet) register(ctx context.Context, name string) error {
	labels := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "arm64",
	}
	for key, v := range k.o.Labels {
		labels[key] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n, err := k.o.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: Name})
	if apierrors.IsAlreadyExists(err) {
		n, err = k.o.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", name, err)
	}
	k.nodes[name] = n.UID
	// What a Raspberry Pi CM4 with 8 GiB reports; the scheduler needs
	// allocatable resources to place even a DaemonSet pod.
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("32Gi"),
	}
	n.Status.Capacity, n.Status.Allocatable = res, res
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
		{Type: corev1.NodeHostName, Address: name},
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		Architecture: "arm64", OperatingSystem: "linux", OSImage: "simulated Compute Blade",
		KernelVersion: "simulated", ContainerRuntimeVersion: "fake://0", KubeletVersion: "fake",
	}
	now := metav1.NewTime(k.o.Clock.Now())
	n.Status.Conditions = mergeCondition(n.Status.Conditions, readyCondition(now))
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		n.Status.Conditions = mergeCondition(n.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHasNo" + string(t),
			LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	if _, err := k.o.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: Name}); err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return nil
}

func readyCondition(now metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "fake kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
	}
}

func mergeCondition(cs []corev1.NodeCondition, c corev1.NodeCondition) []corev1.NodeCondition {
	for i := range cs {
		if cs[i].Type == c.Type {
			if cs[i].Status == c.Status {
				c.LastTransitionTime = cs[i].LastTransitionTime
			}
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}

// heartbeat renews every Node's Ready condition and Lease. The condition is
// patched by strategic merge on its type, so conditions the agent owns
// (BladeThermalCritical) are left alone.
func (k *kubelet) heartbeat(ctx context.Context) error {
	var errs []error
	for name, uid := range k.nodes {
		now := metav1.NewTime(k.o.Clock.Now())
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"fake kubelet is posting ready status","lastHeartbeatTime":%q}]}}`,
			now.UTC().Format(time.RFC3339))
		if _, err := k.o.Client.CoreV1().Nodes().PatchStatus(ctx, name, []byte(patch)); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", name, err))
		}
		if err := k.renewLease(ctx, name, uid, now); err != nil {
			errs = append(errs, fmt.Errorf("lease %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (k *kubelet) renewLease(ctx context.Context, name string, uid types.UID, now metav1.Time) error {
	leases := k.o.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	renew := metav1.NewMicroTime(now.Time)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: name, UID: uid,
			}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &renew},
		}, metav1.CreateOptions{FieldManager: Name})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &renew
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: Name})
	return err
}

// syncPod plays the kubelet for one pod: a terminating pod is removed (its
// containers "stopped" at once), any other is reported running and ready.
func (k *kubelet) syncPod(ctx context.Context, p *corev1.Pod) error {
	pods := k.o.Client.CoreV1().Pods(p.Namespace)
	if p.DeletionTimestamp != nil {
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &p.UID},
		})
		if apierrors.IsConflict(err) {
			return nil // replaced by a pod of the same name
		}
		return err
	}
	if running(p) {
		return nil
	}
	now := metav1.NewTime(k.o.Clock.Now())
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
	p.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	p.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodScheduled, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "fake://" + c.Image,
			ContainerID: fmt.Sprintf("fake://%s/%s", p.UID, c.Name),
			Ready:       true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: Name})
	return err
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
