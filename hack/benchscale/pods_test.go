package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
)

// conversionPodRequesting is a conversion pod requesting cpu, created at
// T0+created.
func conversionPodRequesting(name, cpu string, created time.Duration) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace,
		Labels:            map[string]string{v1alpha1.LabelComponent: v1alpha1.ComponentConversion},
		CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0).Add(created))}}
	pod.Spec.Containers = []corev1.Container{{Name: "convert", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "tools", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}
	return pod
}

// TestSimulatedNodePlacesWhatFits: the node places conversion pods while
// their CPU requests fit its allocatable CPU; the others wait, and are
// looked at again, oldest first, when a placed one ends.
func TestSimulatedNodePlacesWhatFits(t *testing.T) {
	stats := &nodeStats{}
	c := &podCompleter{opts: completerOptions{nodeCPU: resource.MustParse("2"), stats: stats},
		placed: map[string]int64{}, since: map[string]time.Time{}, waiting: map[string]bool{},
		pods:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer c.queue.ShutDown()
	pods := []*corev1.Pod{conversionPodRequesting("a", "1", 0), conversionPodRequesting("b", "1", time.Second),
		conversionPodRequesting("c", "1", 3*time.Second), conversionPodRequesting("d", "1", 2*time.Second)}
	for _, p := range pods {
		require.NoError(t, c.pods.Add(p))
		assert.True(t, isConversion(p))
		assert.Equal(t, int64(1000), cpuRequest(p), "the containers' requests, not the smaller init container's")
	}
	assert.True(t, c.place(benchNamespace+"/a", 1000))
	assert.True(t, c.place(benchNamespace+"/b", 1000))
	assert.False(t, c.place(benchNamespace+"/c", 1000), "no CPU left")
	assert.False(t, c.place(benchNamespace+"/d", 1000), "no CPU left")
	assert.True(t, c.place(benchNamespace+"/a", 1000), "placing a placed pod again takes nothing more")

	c.release(benchNamespace + "/a")
	require.Equal(t, 2, c.queue.Len(), "the waiting pods are looked at again")
	first, _ := c.queue.Get()
	assert.Equal(t, benchNamespace+"/d", first, "the oldest waiting pod first")
	assert.True(t, c.place(benchNamespace+"/d", 1000))
	assert.False(t, c.place(benchNamespace+"/c", 1000))
	waiting, running := stats.peaks()
	assert.Equal(t, 2, waiting, "the most waiting at once")
	assert.Equal(t, 2, running, "the most placed at once")
}
