package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzCPURequest: a pod's CPU request, as the pod completer reads it from
// the quantities the API server holds, is the sum of its containers' or the
// largest init container's, whichever is more, in millicores; no quantity
// makes it panic.
func FuzzCPURequest(f *testing.F) {
	for _, s := range [][3]string{{"1", "500m", "2"}, {"0", "0", "0"}, {"100m", "1e3", "1Ki"}, {"9223372036854775807", "1", "1"}, {"-1", "2", "0.001"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, init string) {
		qa, errA := resource.ParseQuantity(a)
		qb, errB := resource.ParseQuantity(b)
		qi, errI := resource.ParseQuantity(init)
		if errA != nil || errB != nil || errI != nil {
			return
		}
		req := func(q resource.Quantity) corev1.ResourceRequirements {
			return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q}}
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Resources: req(qa)}, {Resources: req(qb)}},
			InitContainers: []corev1.Container{{Resources: req(qi)}},
		}}
		got := cpuRequest(pod)
		if want := max(qa.MilliValue()+qb.MilliValue(), qi.MilliValue(), 0); got != want {
			t.Fatalf("requests %s+%s, init %s: %d millicores, want %d", a, b, init, got, want)
		}
	})
}
