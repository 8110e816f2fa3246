package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestOwnImage(t *testing.T) {
	pod := func(containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ctrl-1", Namespace: "vm-migration-system"},
			Spec: corev1.PodSpec{Containers: containers}}
	}
	env := map[string]string{envPodName: "ctrl-1", envPodNamespace: "vm-migration-system"}
	cases := map[string]struct {
		pod     *corev1.Pod
		env     map[string]string
		want    string
		wantErr string
	}{
		"one container": {
			pod: pod(corev1.Container{Name: "anything", Image: "registry.example.com/vmm:v1"}), env: env,
			want: "registry.example.com/vmm:v1",
		},
		"the controller container among others": {
			pod: pod(corev1.Container{Name: "proxy", Image: "proxy:1"}, corev1.Container{Name: "controller", Image: "registry.example.com/vmm@sha256:ab"}), env: env,
			want: "registry.example.com/vmm@sha256:ab",
		},
		"no controller container among several": {
			pod: pod(corev1.Container{Name: "a", Image: "a:1"}, corev1.Container{Name: "b", Image: "b:1"}), env: env,
			wantErr: `has 2 containers and none named "controller"`,
		},
		"not in a pod": {
			pod: pod(corev1.Container{Name: "controller", Image: "x:1"}), env: map[string]string{},
			wantErr: "POD_NAME and POD_NAMESPACE are empty",
		},
		"own pod missing": {
			pod: pod(corev1.Container{Name: "controller", Image: "x:1"}), env: map[string]string{envPodName: "other", envPodNamespace: "vm-migration-system"},
			wantErr: `reading the controller's own pod vm-migration-system/other`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewSimpleClientset(tc.pod)
			got, err := ownImage(context.Background(), kube, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
