package builders

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Unstructured is obj as a client would send it to create it: its status
// and the fields the API server sets (uid, generation, creation time,
// namespace, which the request names) left out. Tests edit it further to
// send what a typed object cannot hold (a wrong type, an unknown field).
func Unstructured(obj runtime.Object) *unstructured.Unstructured {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(fmt.Sprintf("builders: converting %T: %v", obj, err))
	}
	delete(content, "status")
	if meta, ok := content["metadata"].(map[string]any); ok {
		for _, k := range []string{"uid", "generation", "creationTimestamp", "namespace", "resourceVersion"} {
			delete(meta, k)
		}
	}
	return &unstructured.Unstructured{Object: content}
}
