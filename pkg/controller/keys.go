package controller

import (
	"strings"

	v1alpha1 "platform.example/vm-migration/pkg/apis/migration/v1alpha1"
	"platform.example/vm-migration/pkg/vsphere"
)

// The keys the transfer limits and the claims count by. Each names one
// thing of vSphere whatever the alias it was reached through: the same
// endpoint spelt another way (case, default port, trailing path), its
// name or its IP address, a host through its vCenter or directly.

// endpointKey is the identity of an endpoint URL (vsphere.EndpointID), or
// the URL lower-cased when it does not parse (the schema admits none such).
func endpointKey(rawURL string) string {
	if id, err := vsphere.EndpointID(rawURL); err == nil {
		return id
	}
	return strings.ToLower(rawURL)
}

// hostSlotKey names the ESXi host a migration reads from: its hardware
// UUID where the inventory holds it (one host, through its vCenter or
// directly), else the endpoint and the host's reference (or name).
func hostSlotKey(url string, src *v1alpha1.SourceInventory) string {
	if src.HostUUID != "" {
		return "host-uuid:" + strings.ToLower(src.HostUUID)
	}
	host := src.HostMoRef
	if host == "" {
		host = src.Host
	}
	return endpointKey(url) + "/" + host
}

// datastoreSlotKey names a datastore a disk is read from: its URL where the
// inventory holds it (ds:///vmfs/volumes/<uuid>/: one datastore, through
// any endpoint), else the endpoint, datacenter and name, so that the
// datastore1 of two standalone hosts are two datastores.
func datastoreSlotKey(url string, src *v1alpha1.SourceInventory, d v1alpha1.SourceDisk) string {
	if d.DatastoreURL != "" {
		return "ds-url:" + d.DatastoreURL
	}
	if d.Datastore == "" {
		return ""
	}
	return endpointKey(url) + "/" + src.Datacenter + "/" + d.Datastore
}

// sourceClaimKeys name a source VM across the cluster by its instance
// UUID, qualified by who reported it: the vCenter (its instance UUID,
// status.source.server) and the ESXi host running it (its hardware UUID),
// so that the VM reached through the vCenter's name or IP address, or
// directly through its host, meets the claims of the others. Without
// either, the endpoint qualifies it. None when the VM's instance UUID is
// not known.
func sourceClaimKeys(url string, inv *v1alpha1.SourceInventory) []string {
	if inv == nil || inv.InstanceUUID == "" {
		return nil
	}
	vm := "/vm:" + strings.ToLower(inv.InstanceUUID)
	var keys []string
	if inv.Server != "" {
		keys = append(keys, "server:"+strings.ToLower(inv.Server)+vm)
	}
	if inv.HostUUID != "" {
		keys = append(keys, "host-uuid:"+strings.ToLower(inv.HostUUID)+vm)
	}
	if len(keys) == 0 {
		keys = append(keys, "endpoint:"+endpointKey(url)+vm)
	}
	return keys
}
