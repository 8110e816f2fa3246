// Package v1alpha1 is the v1alpha1 version of the migration.platform.example
// API: the VirtualMachineMigration resource that asks the controller to move
// one virtual machine from VMware vSphere into KubeVirt.
//
// +k8s:deepcopy-gen=package
// +groupName=migration.platform.example
package v1alpha1
