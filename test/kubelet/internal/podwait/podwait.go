// Package podwait is how the real-kubelet suites (test/kubelet and
// test/kubelet/flux) wait for a pod: the one live pod a label selector
// matches, Ready, described in a line when it is not.
package podwait

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Ready is a condition for internal/testwait's Poll: exactly one pod in
// namespace matching selector is not being deleted, it is Ready, and cond
// holds for it when cond is set. Each poll stores that pod in *pod.
func Ready(c kubernetes.Interface, namespace, selector string, cond func(*corev1.Pod) (bool, string), pod **corev1.Pod) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return false, fmt.Sprintf("%d pods match %s", len(live), selector)
		}
		*pod = &live[0]
		if !IsReady(*pod) {
			return false, Describe(*pod)
		}
		if cond != nil {
			return cond(*pod)
		}
		return true, ""
	}
}

// IsReady reports the pod's Ready condition.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Describe says in one line why a pod is not Ready: its phase, the
// conditions that are not True, and each container's restarts, waiting
// reason and last exit.
func Describe(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s phase %s", p.Name, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "; container %s restarts %d", cs.Name, cs.RestartCount)
		if w := cs.State.Waiting; w != nil {
			fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
		}
		if term := cs.LastTerminationState.Terminated; term != nil {
			fmt.Fprintf(&b, " last exit %d (%s)", term.ExitCode, term.Reason)
		}
	}
	return b.String()
}

// Restarts is the first container's restart count.
func Restarts(p *corev1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}
