package drain

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestClassify pins kubectl drain's filters (k8s.io/kubectl/pkg/drain,
// filters.go) as this package applies them. The PodDisruptionBudget side
// of a drain is the API server's and is tested against a real one in the
// maintenance controller's suite.
func TestClassify(t *testing.T) {
	owned := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "x", UID: "u", Controller: ptr.To(true)}}
	}
	now := metav1.Now()
	emptyDir := []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	cases := map[string]struct {
		pod  corev1.Pod
		opts Options
		want Class
	}{
		"replicated pod is evicted": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("ReplicaSet")}}, Options{}, Evict},
		"DaemonSet pod stays":       {corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("DaemonSet")}}, Options{}, Leave},
		"mirror pod stays": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{"kubernetes.io/config.mirror": "abc"}}}, Options{}, Leave},
		"terminating pod is waited for": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, OwnerReferences: owned("ReplicaSet")}}, Options{}, Wait},
		"finished pod never blocks":     {corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, Options{}, Finished},
		"emptyDir blocks by default": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("ReplicaSet")},
			Spec: corev1.PodSpec{Volumes: emptyDir}}, Options{}, BlockEmptyDir},
		"emptyDir evicted when allowed": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("ReplicaSet")},
			Spec: corev1.PodSpec{Volumes: emptyDir}}, Options{DeleteEmptyDirData: true}, Evict},
		"bare pod blocks": {corev1.Pod{}, Options{}, BlockUnmanaged},
		"bare pod with emptyDir allowed still blocks": {corev1.Pod{Spec: corev1.PodSpec{Volumes: emptyDir}},
			Options{DeleteEmptyDirData: true}, BlockUnmanaged},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Classify(&tc.pod, tc.opts); got != tc.want {
				t.Errorf("Classify = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBlockingNamesEveryPod(t *testing.T) {
	r := Result{Remaining: []Remaining{
		{Pod: "apps/db-0", Why: DisruptionBudget, Detail: "The disruption budget db needs 1 healthy pods and has 1 currently"},
		{Pod: "apps/scratch", Why: EmptyDir},
	}}
	want := "apps/db-0 (disruption budget: The disruption budget db needs 1 healthy pods and has 1 currently), apps/scratch (emptyDir data)"
	if got := r.Blocking(); got != want || r.Done() {
		t.Fatalf("Blocking() = %q, Done = %t", got, r.Done())
	}
}
