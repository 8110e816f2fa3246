// Package cdi installs the real Containerized Data Importer (CDI v1.65.0,
// built by hack/build-cdi.sh, its images by hack/build-cdi-images.sh) into
// a test cluster the way CDI's operator lays it out, without the operator:
//
//   - the namespace cdi and CDI's 12 CustomResourceDefinitions (the
//     crds/ folder of the CDI build);
//   - the RBAC of cdi-deployment (the controller), cdi-apiserver and
//     cdi-uploadproxy, as CDI's own operator generators produced it at
//     build time (resources/cluster-rbac.yaml, resources/namespaced-rbac.yaml);
//   - the certificates CDI's operator would make and rotate, made once here:
//     the API server's signer and serving certificate (Service cdi-api), the
//     upload proxy's, the upload server's signer and the upload client
//     signer with its client certificate, each signer's CA bundle
//     ConfigMap, and the Secret cdi-api-signing-key (the upload and clone
//     token keys the controller mounts at /var/run/cdi/token/keys);
//   - the CDI CR cdi and the CDIConfig config (owned by it);
//   - cdi-deployment, cdi-apiserver and cdi-uploadproxy as Deployments with
//     their Services (cdi-api, cdi-uploadproxy, cdi-prometheus-metrics), in
//     the shapes of pkg/operator/resources/namespaced (env, args, ports,
//     probes, mounts, security contexts), images IfNotPresent;
//   - once the API server serves, the APIService
//     v1beta1.upload.cdi.kubevirt.io and CDI's webhook configurations
//     (resources/registrations.yaml) with the API server's CA bundle.
//
// Install waits for the Deployments to be Available, for the controller
// to have read the CDI CR and CDIConfig (it fills the CDIConfig status) and
// for the DataVolume webhooks to answer. Keys and certificates go into
// Secrets only: never into logs, arguments or environment variables.
package cdi
