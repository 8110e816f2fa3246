//go:build integration

package integration

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.example/vm-migration/test/framework"
)

func TestSmoke(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	v, err := env.Kubernetes(t).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s, namespace %s", v.GitVersion, ns)
	_, err = env.Kubernetes(t).CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
