# The VM migration controller. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
TESTBIN := _output/testbin
# The node's cluster DNS: hack/build-coredns.sh links the folder of the
# CoreDNS binary here (the targets that start a node set COREDNS_DIR to it).
COREDNS := _output/coredns
VERSION ?= dev
IMAGE ?= platform.example/vm-migration-controller:$(VERSION)
IMAGE_OUT ?= _output/image
CONVERSION_IMAGE ?= platform.example/vm-migration-conversion:$(VERSION)

.PHONY: help build test upstream test-unit unit-deps test-fuzz bench-hash test-integration test-node node node-deps test-e2e test-alerts test-conversion install-plugin image conversion-image run-local govc local-import local-remove bench-transfer bench-downtime bench-scale generate verify manifests test-crds testbin cdi cdi-images test-cdi local-path coredns kubevirt kubevirt-node test-kubevirt fmt vet

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build the controller and the transfer command into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

test: ## everything CI runs: make verify first (it fails in minutes, before the long suites), then unit tests, alert rules, integration and end-to-end tests against a real API server, then the BIOS real-guest conversion
	$(MAKE) verify
	$(MAKE) -j4 --output-sync=target upstream
	$(MAKE) test-unit
	$(MAKE) test-fuzz
	$(MAKE) test-alerts
	$(MAKE) test-integration
	$(MAKE) test-e2e
	$(MAKE) test-conversion GUESTS=bios FAILING_DISKS=0

test-unit: unit-deps ## unit tests only (no API server needed)
	$(GO) test -count=1 ./...

unit-deps: ## install, when missing, the Debian package the unit tests of the conversion script run (qemu-utils: qemu-img and qemu-io make, write and commit the disks' overlays; as root; the tests skip without it)
	hack/install-debian-packages.sh qemu-utils

test-fuzz: ## every Go fuzz target of the module (each func FuzzXxx, found anew on each run) for FUZZTIME each (default 10s; about 5 minutes in all): one line per target with its executions, then a summary (hack/fuzz.sh); a crasher is written to the package's testdata/fuzz/ and fails it
	FUZZTIME=$(or $(FUZZTIME),10s) GO=$(GO) hack/fuzz.sh

test-integration: testbin coredns node-deps ## integration tests against a real kube-apiserver and etcd, and the real node's (test/integration/node)
	TESTBIN_DIR=$(abspath $(TESTBIN)) COREDNS_DIR=$(abspath $(COREDNS)) $(GO) test -count=1 -tags integration ./test/integration/...

test-node: testbin coredns node-deps ## the real node's tests alone: restricted pods from images built here, volumes, images never pulled, workloads, cluster DNS, nothing left after stop
	TESTBIN_DIR=$(abspath $(TESTBIN)) COREDNS_DIR=$(abspath $(COREDNS)) $(GO) test -count=1 -tags integration ./test/integration/node/

node: testbin coredns node-deps ## a control plane and a real node with cluster DNS until Ctrl-C (test/framework/cmd/testnode; prints the kubeconfig and the node line)
	TESTBIN_DIR=$(abspath $(TESTBIN)) COREDNS_DIR=$(abspath $(COREDNS)) $(GO) run ./test/framework/cmd/testnode

node-deps: ## install, when missing, the Debian packages the real node needs (runc, CNI plugins, iptables, conntrack; as root)
	hack/install-node-deps.sh

test-e2e: testbin coredns node-deps kubevirt cdi-images local-path ## whole migrations on a real control plane and node: the controller's Deployment and image as shipped, transfer and conversion pods as containers, vcsim, KubeVirt's own virt-api and virt-controller, CDI's own controller, apiserver and uploadproxy cloning every disk with its own pods, local-path-provisioner's volumes; simulated virt-handler (test/standins) and virt-v2v (test/images)
	$(E2E_ENV) $(GO) test -count=1 -tags e2e -timeout 75m ./test/e2e/...

# E2E_ENV names the upstream builds the e2e stack runs (each prints its folder last).
E2E_ENV = TESTBIN_DIR=$(abspath $(TESTBIN)) COREDNS_DIR=$(abspath $(COREDNS)) KUBEVIRT_DIR=$$(hack/build-kubevirt.sh | tail -n 1) CDI_DIR=$$(hack/build-cdi.sh | tail -n 1) \
	CDI_IMAGES_DIR=$$(hack/build-cdi-images.sh | tail -n 1) LOCAL_PATH_DIR=$$(hack/build-local-path.sh | tail -n 1)

test-alerts: ## promtool check and unit tests of the alerts in manifests/monitoring (installs the Debian package prometheus when missing)
	hack/test-alerts.sh

image: ## the controller's OCI image without Docker (go-containerregistry): $(IMAGE_OUT)/oci (layout), vm-migration-controller.tar, sbom.spdx.json; IMAGE=repo:tag IMAGE_OUT=dir
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags "-s -w" -o $(IMAGE_OUT)/bin/ ./cmd/migration-controller ./cmd/vm-transfer
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./hack/image --bin-dir $(IMAGE_OUT)/bin --out $(IMAGE_OUT) \
	  --image $(IMAGE) --version $(VERSION) --revision "$$(git rev-parse --short HEAD 2>/dev/null)"

conversion-image: ## the conversion Jobs' virt-v2v image from Debian packages, without Docker (as root; installs mmdebstrap when missing; cached by content, seconds when nothing changed): _output/conversion-image/{oci,vm-migration-conversion.tar,sbom.spdx.json}; CONVERSION_IMAGE=repo:tag; prints the reference last
	IMAGE=$(CONVERSION_IMAGE) VERSION=$(VERSION) hack/conversion-image/build.sh

install-plugin: ## install kubectl-vmm into GOBIN (default GOPATH/bin); with it on PATH, run kubectl vmm
	$(GO) install -trimpath -ldflags "-s -w" ./cmd/kubectl-vmm

test-conversion: ## real guests: installs the Debian packages it needs (as root), builds the guest images (cached), converts a BIOS and an EFI Debian guest with the real virt-v2v end to end and boots them; fails if any step is simulated; KUBEVIRT_NODE=1: the guests run under KubeVirt's own virt-handler and virt-launcher (make kubevirt-node), their NIC on the pod network
	GUESTS="$(GUESTS)" FAILING_DISKS="$(FAILING_DISKS)" hack/test-conversion.sh

run-local: ## the product as it ships on a real local node (as root) with a sample migration, live progress, then its own time and downtime; ONCE=1: no terminal, exit 0 only on success; GUEST=bios|efi: real guests and the real conversion; VMS=a,b: the source VMs (the first is the example's); DISK_GIB=4: each sample VM's first disk 4 GiB instead of 8 MiB; KUBEVIRT_NODE=1: KubeVirt's own virt-handler and virt-launcher run the VM (with GUEST)
	ONCE=$(ONCE) GUEST=$(GUEST) VMS=$(VMS) DISK_GIB=$(DISK_GIB) hack/run-local.sh

govc: ## govc with the command set of the project's govmomi (hack/tools/govc, cached; _output/govc/govc), for changing make run-local's simulated VMs (docs/contributors/testing.md, The local vCenter)
	hack/build-govc.sh

local-import: ## import image tarballs into the node of a running make run-local: TARBALL=file (several, space-separated); the node pulls from no registry
	hack/local-node.sh import $(TARBALL)

local-remove: ## remove images from the node of a running make run-local: REF=repo:tag (hack/local-node.sh list lists them)
	hack/local-node.sh remove $(REF)

bench-transfer: ## (installs curl, openssl and time when missing) vm-transfer vs curl, curl -o file and curl|tee|openssl on a 2 GiB vcsim disk (throughput, CPU/GiB, RSS), and 1-8 streams over capped connections
	hack/bench-transfer.sh

bench-hash: ## (installs time when missing) block-tree hashing: vm-transfer checksum on one core and on all cores against sha256sum, same run, on a 2 GiB random file and a 2 GiB sparse file (25% allocated): seconds, MiB/s, CPU-s/GiB (hack/bench-hash.sh; SIZE_MIB, ROUNDS)
	hack/bench-hash.sh

bench-downtime: testbin coredns node-deps kubevirt cdi-images local-path ## (as root) the outage against the disk's size: one VM of one disk of SIZE GiB (default "2 8", one run each) through the real node, CDI and local-path with the simulated conversion; per size transfer, conversion, other and total seconds and the bytes written and read per disk byte during the outage (hack/bench-downtime.sh)
	$(E2E_ENV) SIZE="$(or $(SIZE),2 8)" hack/bench-downtime.sh

bench-scale: ## control-plane benchmark: N migrations (N=1000; HOSTS=10, QUIET=1m) on a real control plane, light stand-ins and a pod completer (no node), the controller as a process; API requests, status writes, RSS, reconcile latency, vSphere calls, the outage per migration (NODE_CPU=2 CONVERSION_TIME=5s PACING=compare: with and without conversion pacing)
	N=$(or $(N),1000) HOSTS=$(or $(HOSTS),10) QUIET=$(or $(QUIET),1m) hack/bench-scale.sh

upstream: testbin coredns kubevirt cdi-images local-path ## build (or reuse the cached) every upstream component the suites run, at once with make -j (make test does: they build side by side on a machine with cores to spare; each is cached by content outside the clone)

testbin: ## build (or reuse the cached) kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl, etcd and containerd (with its shim and ctr)
	hack/build-testbin.sh

cdi: ## build (or reuse the cached) CDI v1.65.0 from its modules: cdi-controller, cdi-apiserver, cdi-uploadproxy, cdi-importer, cdi-cloner, cdi-uploadserver and its CRDs (_output/cdi; hack/build-cdi.sh --crds writes only the CRDs, which make test-e2e installs)
	hack/build-cdi.sh

cdi-images: cdi ## (as root) CDI's images for the test node, built here from Debian packages and the CDI build, never pulled: importer, cloner, uploadserver, controller, apiserver, uploadproxy as docker-archive tarballs, plus the RBAC, APIService and webhooks of CDI's operator generators (cached by content, _output/cdi-images; prints the folder last)
	hack/build-cdi-images.sh

test-cdi: testbin coredns node-deps cdi-images local-path ## the real CDI and the real storage (local-path-provisioner) on the real node (test/framework/cdi, test/framework/localpath): an HTTP DataVolume imported by CDI's importer pod, byte for byte; CDI's webhook refusing an invalid DataVolume; local-path volumes made and removed; the DataVolume the controller renders cloned by CDI into local-path
	TESTBIN_DIR=$(abspath $(TESTBIN)) COREDNS_DIR=$(abspath $(COREDNS)) CDI_DIR=$$(hack/build-cdi.sh | tail -n 1) CDI_IMAGES_DIR=$$(hack/build-cdi-images.sh | tail -n 1) \
		LOCAL_PATH_DIR=$$(hack/build-local-path.sh | tail -n 1) \
		$(GO) test -count=1 -tags integration -timeout 20m -v ./test/integration/cdi/

local-path: ## build (or reuse the cached) Rancher's local-path-provisioner v0.0.30 from its module and its two images (_output/local-path): the test node's real storage
	hack/build-local-path.sh

kubevirt: ## build (or reuse the cached) KubeVirt v1.8.2's control plane from its modules: virt-operator, virt-api, virt-controller, its CRDs and install objects (_output/kubevirt; make test-e2e installs it)
	hack/build-kubevirt.sh

kubevirt-node: kubevirt ## (as root) build (or reuse the cached) KubeVirt v1.8.2's node side: virt-handler and virt-launcher from its modules, their images from Debian packages (libvirt and QEMU of trixie), never pulled (_output/kubevirt-node; make test-kubevirt installs it)
	hack/build-kubevirt-node.sh

test-kubevirt: testbin coredns node-deps kubevirt kubevirt-node ## the real KubeVirt on the real node (test/integration/kubevirt): its generated CRDs established, virt-api and virt-controller from images built here, the rendered VM judged by KubeVirt's own webhooks, virt-handler's DaemonSet running a VM in the real virt-launcher; not part of make test
	TESTBIN_DIR=$(abspath $(TESTBIN)) COREDNS_DIR=$(abspath $(COREDNS)) KUBEVIRT_DIR=$$(hack/build-kubevirt.sh | tail -n 1) CDI_DIR=$$(hack/build-cdi.sh --crds | tail -n 1) \
		KUBEVIRT_NODE_DIR=$$(hack/build-kubevirt-node.sh | tail -n 1) \
		$(GO) test -count=1 -v -tags integration -timeout 20m ./test/integration/kubevirt/

coredns: ## build (or reuse the cached) CoreDNS from its module for the test node's cluster DNS (_output/coredns; the targets that start a node set COREDNS_DIR to it)
	hack/build-coredns.sh

generate: ## regenerate deepcopy, clients, listers, informers, the CRD and the test CRDs' schemas
	hack/update-codegen.sh

manifests: ## regenerate the CRD into manifests/crd
	$(GO) tool controller-gen crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config=manifests/crd

test-crds: ## regenerate the schemas of KubeVirt's and CDI's CRDs in test/crds from their Go types
	hack/update-test-crds.sh

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

vet: ## go vet
	$(GO) vet ./...

verify: ## gofmt clean, vet clean, generated code and test CRD schemas up to date (the quickest check first; about 2 minutes in all)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	hack/verify-codegen.sh
