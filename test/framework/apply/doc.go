// Package apply installs an upstream component's objects into the test
// cluster the way its operator would: server-side apply under one field
// manager, CRDs waited for until Established, Deployments until
// Available, APIServices until the aggregator reaches them, and the CA
// bundles of webhook configurations and APIServices filled in. The
// installers of test/framework/cdi and test/framework/kubevirt share it;
// what each component needs of its own stays in its package.
package apply
