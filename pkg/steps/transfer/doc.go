// Package transfer renders the Kubernetes objects that give one attempt of
// the transfer Job a live progress channel with the least privilege that
// works against a real API server and needs no kubelet: a ConfigMap of its
// own, and a ServiceAccount whose Role may only get and patch that one
// ConfigMap (resourceNames). The vm-transfer command writes its progress
// (and its result) there with --progress-configmap; the controller reads it
// through its ConfigMap informer.
//
// The transfer Job itself is rendered by package steps/pipeline
// (RenderTransferJob); this package is the narrow RBAC it can run under
// instead of a namespace-wide ServiceAccount that may patch every ConfigMap.
// All objects are pure functions of the migration and the attempt, carry a
// controller owner reference to the migration, and have deterministic names.
package transfer
