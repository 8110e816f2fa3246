//go:build integration

package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.example/vm-migration/test/framework"
)

func TestSmoke(t *testing.T) {
	env := framework.Env(t)
	ns := env.Namespace(t)
	v, err := env.Kubernetes(t).Discovery().ServerVersion()
	require.NoError(t, err, "reading the server version")
	t.Logf("server %s, namespace %s", v.GitVersion, ns)
	_, err = env.Kubernetes(t).CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	require.NoError(t, err, "getting the test's namespace %s", ns)
}
