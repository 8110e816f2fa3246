package cdi

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Names CDI's operator gives its objects (kubevirt.io/containerized-data-importer
// pkg/common and pkg/operator/resources).
const (
	// Namespace is the namespace CDI is installed in.
	Namespace = "cdi"
	// ControllerName is the controller's Deployment and ServiceAccount
	// name.
	ControllerName = "cdi-deployment"
	// ControllerServiceAccount is the controller's ServiceAccount.
	ControllerServiceAccount = "cdi-sa"
	// APIServerName is the API server's Deployment and ServiceAccount.
	APIServerName = "cdi-apiserver"
	// UploadProxyName is the upload proxy's Deployment, ServiceAccount and
	// Service.
	UploadProxyName = "cdi-uploadproxy"
	// CRName is the name of the cluster-scoped CDI CR.
	CRName = "cdi"
	// ConfigName is the name of the cluster-scoped CDIConfig.
	ConfigName = "config"

	apiService          = "cdi-api"
	uploadProxyName     = UploadProxyName
	metricsService      = "cdi-prometheus-metrics"
	apiSigningKeySecret = "cdi-api-signing-key"
	componentLabel      = "cdi.kubevirt.io"
	prometheusLabel     = "prometheus.cdi.kubevirt.io"
	// tokenKeyDir is where the controller reads the token keys
	// (pkg/controller.TokenKeyDir).
	tokenKeyDir = "/var/run/cdi/token/keys"
	// servingPort is the port every CDI server listens on in its pod.
	servingPort = 8443
	// verbosity is the -v of CDI's servers (CDI's default).
	verbosity = "1"
	// ovirtPopulatorImage names the oVirt populator image the controller
	// requires a value for; no such image is built (the project never
	// imports from oVirt), so an oVirt DataVolume's pod cannot start.
	ovirtPopulatorImage = "platform.example/vm-migration/cdi-ovirt-populator-not-built:none"
)

// commonLabels are the labels CDI's operator puts on what it creates.
func commonLabels() map[string]string {
	return map[string]string{
		componentLabel:                 "",
		"app.kubernetes.io/managed-by": "cdi-operator",
		"app.kubernetes.io/component":  "storage",
		"app":                          "containerized-data-importer",
	}
}

func withLabels(base map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		base[kv[i]] = kv[i+1]
	}
	return base
}

// restrictedContainer is the security context CDI gives its containers.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(true),
	}
}

func httpsReadiness() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(servingPort), Scheme: corev1.URISchemeHTTPS,
		}},
		InitialDelaySeconds: 2, PeriodSeconds: 5, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1,
	}
}

func requests() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("150Mi"),
	}}
}

func secretVolume(name, secret string, keys ...string) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, DefaultMode: ptr.To(corev1.SecretVolumeSourceDefaultMode),
	}}}
	for _, k := range keys {
		v.Secret.Items = append(v.Secret.Items, corev1.KeyToPath{Key: k, Path: k})
	}
	return v
}

func configMapVolume(name, configMap string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
		Items:                []corev1.KeyToPath{{Key: "ca-bundle.crt", Path: "ca-bundle.crt"}},
		DefaultMode:          ptr.To(corev1.ConfigMapVolumeSourceDefaultMode),
	}}}
}

// deployment is one of CDI's Deployments: one replica, the component
// label as selector, CDI's common labels, a non-root pod.
func deployment(name, serviceAccount string, extraLabels map[string]string, c corev1.Container, volumes []corev1.Volume) *appsv1.Deployment {
	labels := withLabels(commonLabels(), componentLabel, name)
	for k, v := range extraLabels {
		labels[k] = v
	}
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.SecurityContext = restrictedContainer()
	c.Resources = requests()
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{componentLabel: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: serviceAccount,
					SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
					Containers:         []corev1.Container{c},
					Volumes:            volumes,
				},
			},
		},
	}
}

// controllerDeployment is cdi-deployment as
// pkg/operator/resources/namespaced/controller.go shapes it: the images of
// the pods it starts in its environment, the token keys, the upload
// server's signers and their bundles mounted, `cat /tmp/ready` as its
// readiness probe, metrics on 8443.
func controllerDeployment(img Images) *appsv1.Deployment {
	c := corev1.Container{
		Name:  ControllerName,
		Image: img.Controller,
		Args:  []string{"-v=" + verbosity},
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: servingPort, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{
			{Name: "IMPORTER_IMAGE", Value: img.Importer},
			{Name: "CLONER_IMAGE", Value: img.Cloner},
			{Name: "UPLOADSERVER_IMAGE", Value: img.UploadServer},
			{Name: "UPLOADPROXY_SERVICE", Value: UploadProxyName},
			{Name: "OVIRT_POPULATOR_IMAGE", Value: ovirtPopulatorImage},
			{Name: "PULL_POLICY", Value: string(corev1.PullIfNotPresent)},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
			InitialDelaySeconds: 2, PeriodSeconds: 5, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "cdi-api-signing-key", MountPath: tokenKeyDir},
			{Name: "uploadserver-ca-cert", MountPath: "/var/run/certs/cdi-uploadserver-signer"},
			{Name: "uploadserver-client-ca-cert", MountPath: "/var/run/certs/cdi-uploadserver-client-signer"},
			{Name: "uploadserver-ca-bundle", MountPath: "/var/run/ca-bundle/cdi-uploadserver-signer-bundle"},
			{Name: "uploadserver-client-ca-bundle", MountPath: "/var/run/ca-bundle/cdi-uploadserver-client-signer-bundle"},
		},
	}
	return deployment(ControllerName, ControllerServiceAccount, map[string]string{prometheusLabel: "true"}, c, []corev1.Volume{
		secretVolume("cdi-api-signing-key", apiSigningKeySecret, "id_rsa.pub", "id_rsa"),
		secretVolume("uploadserver-ca-cert", "cdi-uploadserver-signer", corev1.TLSCertKey, corev1.TLSPrivateKeyKey),
		secretVolume("uploadserver-client-ca-cert", "cdi-uploadserver-client-signer", corev1.TLSCertKey, corev1.TLSPrivateKeyKey),
		configMapVolume("uploadserver-ca-bundle", "cdi-uploadserver-signer-bundle"),
		configMapVolume("uploadserver-client-ca-bundle", "cdi-uploadserver-client-signer-bundle"),
	})
}

// apiServerDeployment is cdi-apiserver as namespaced/apiserver.go shapes
// it: its serving certificate and its signer's bundle mounted, HTTPS
// /healthz readiness on 8443.
func apiServerDeployment(img Images) *appsv1.Deployment {
	c := corev1.Container{
		Name:           APIServerName,
		Image:          img.APIServer,
		Args:           []string{"-v=" + verbosity},
		Ports:          []corev1.ContainerPort{{Name: APIServerName, ContainerPort: servingPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: httpsReadiness(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "ca-bundle", MountPath: "/var/run/certs/cdi-apiserver-signer-bundle", ReadOnly: true},
			{Name: "server-cert", MountPath: "/var/run/certs/cdi-apiserver-server-cert", ReadOnly: true},
		},
	}
	return deployment(APIServerName, APIServerName, nil, c, []corev1.Volume{
		configMapVolume("ca-bundle", "cdi-apiserver-signer-bundle"),
		secretVolume("server-cert", "cdi-apiserver-server-cert", corev1.TLSCertKey, corev1.TLSPrivateKeyKey),
	})
}

// uploadProxyDeployment is cdi-uploadproxy as namespaced/uploadproxy.go
// shapes it: the token public key from cdi-api-signing-key (a reference,
// not a value), its serving certificate and the upload client certificate
// mounted, HTTPS /healthz readiness on 8443.
func uploadProxyDeployment(img Images) *appsv1.Deployment {
	c := corev1.Container{
		Name:  UploadProxyName,
		Image: img.UploadProxy,
		Args:  []string{"-v=" + verbosity},
		Env: []corev1.EnvVar{{Name: "APISERVER_PUBLIC_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: apiSigningKeySecret}, Key: "id_rsa.pub",
		}}}},
		ReadinessProbe: httpsReadiness(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "server-cert", MountPath: "/var/run/certs/cdi-uploadproxy-server-cert", ReadOnly: true},
			{Name: "client-cert", MountPath: "/var/run/certs/cdi-uploadserver-client-cert", ReadOnly: true},
		},
	}
	return deployment(UploadProxyName, UploadProxyName, nil, c, []corev1.Volume{
		secretVolume("server-cert", "cdi-uploadproxy-server-cert", corev1.TLSCertKey, corev1.TLSPrivateKeyKey),
		secretVolume("client-cert", "cdi-uploadserver-client-cert", corev1.TLSCertKey, corev1.TLSPrivateKeyKey),
	})
}

// services are cdi-api and cdi-uploadproxy (443 to the pods' 8443) and
// the controller's metrics Service.
func services() []*corev1.Service {
	svc := func(name string, selector map[string]string, port corev1.ServicePort) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: withLabels(commonLabels(), componentLabel, name)},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: selector,
				Ports:    []corev1.ServicePort{port},
			},
		}
	}
	https := corev1.ServicePort{Port: 443, TargetPort: intstr.FromInt32(servingPort), Protocol: corev1.ProtocolTCP}
	return []*corev1.Service{
		svc(apiService, map[string]string{componentLabel: APIServerName}, https),
		svc(UploadProxyName, map[string]string{componentLabel: UploadProxyName}, https),
		svc(metricsService, map[string]string{prometheusLabel: "true"},
			corev1.ServicePort{Name: "metrics", Port: servingPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}),
	}
}

// cdiCR is the CDI CR: the one active CDI the controller looks for; its
// pull policy is the node's (images are imported, never pulled).
func cdiCR() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1",
		"kind":       "CDI",
		"metadata":   map[string]any{"name": CRName, "labels": toAny(commonLabels())},
		"spec":       map[string]any{"imagePullPolicy": string(corev1.PullIfNotPresent)},
	}}
}

// cdiConfig is the CDIConfig, owned by the CDI CR as CDI's operator
// makes it; the controller fills its status.
func cdiConfig(owner *unstructured.Unstructured) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cdi.kubevirt.io/v1beta1",
		"kind":       "CDIConfig",
		"metadata": map[string]any{
			"name":   ConfigName,
			"labels": toAny(commonLabels()),
			"ownerReferences": []any{map[string]any{
				"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI", "name": owner.GetName(),
				"uid": string(owner.GetUID()), "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{},
	}}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
