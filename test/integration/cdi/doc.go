// Package cdi holds the integration tests of the real CDI (v1.65.0, built
// by hack/build-cdi.sh, its images by hack/build-cdi-images.sh) installed
// on the test framework's real node by test/framework/cdi: a DataVolume
// with an HTTP source is imported by CDI's own importer pod into a claim
// of the storage stand-in, byte for byte, and CDI's own webhook refuses an
// invalid DataVolume. They need root, hack/build-testbin.sh,
// hack/install-node-deps.sh and both CDI builds; `make test-cdi` runs them:
//
//	TESTBIN_DIR=$PWD/_output/testbin CDI_DIR=$(hack/build-cdi.sh | tail -1) \
//	  CDI_IMAGES_DIR=$(hack/build-cdi-images.sh | tail -1) \
//	  go test -tags integration ./test/integration/cdi/
//
// Without CDI_IMAGES_DIR the tests skip.
package cdi
