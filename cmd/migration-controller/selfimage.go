package main

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Environment variables the Deployment sets from the downward API, naming
// the controller's own Pod.
const (
	envPodName      = "POD_NAME"
	envPodNamespace = "POD_NAMESPACE"
)

// controllerContainer is the name of the controller's container in its
// Deployment (manifests/base/deployment.yaml).
const controllerContainer = "controller"

// ownImage returns the image the controller itself runs from: the image of
// its container in its own Pod, which it reads by the name and namespace
// the downward API puts in POD_NAME and POD_NAMESPACE. The transfer Jobs run
// vm-transfer from that image, so whatever sets the Deployment's image (a
// kustomize images: entry in any overlay, a Helm value, kubectl set image)
// sets theirs too, and the two can never disagree.
func ownImage(ctx context.Context, kube kubernetes.Interface, getenv func(string) string) (string, error) {
	name, namespace := getenv(envPodName), getenv(envPodNamespace)
	if name == "" || namespace == "" {
		return "", errors.New("--transfer-image is not set and the controller does not know its own Pod (POD_NAME and POD_NAMESPACE are empty): set --transfer-image to the controller's image, or run it as the shipped Deployment")
	}
	pod, err := kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the controller's own pod %s/%s for its image (--transfer-image is not set): %w", namespace, name, err)
	}
	containers := pod.Spec.Containers
	if len(containers) == 1 {
		return containers[0].Image, nil
	}
	for _, c := range containers {
		if c.Name == controllerContainer {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the controller's own pod %s/%s has %d containers and none named %q: set --transfer-image", namespace, name, len(containers), controllerContainer)
}
