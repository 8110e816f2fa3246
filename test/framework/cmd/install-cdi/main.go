// Command install-cdi installs the real storage and the real CDI, as
// hack/build-local-path.sh and hack/build-cdi-images.sh built them, into a
// running test cluster (make run-local's), their images already imported
// into the node: local-path-provisioner (test/framework/localpath) with
// its volumes under --volumes, then CDI's controller, apiserver and
// uploadproxy (test/framework/cdi), then local-path's StorageProfile's
// claim properties (ReadWriteOnce, Filesystem), as a cluster's admin sets
// them for a provisioner CDI does not know:
//
//	install-cdi --kubeconfig FILE --cdi-dir DIR --cdi-images-dir DIR --local-path-dir DIR --volumes DIR
//
// It prints, last, "cdi: <version> controller, apiserver, uploadproxy on
// node <node>; storage: local-path-provisioner <version>", and exits 1
// with one line on standard error when the install fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"platform.example/vm-migration/test/framework/cdi"
	"platform.example/vm-migration/test/framework/localpath"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "install-cdi:", err)
		os.Exit(1)
	}
}

func run() error {
	var kubeconfig, cdiDir, imagesDir, localPathDir, volumes string
	flag.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig")
	flag.StringVar(&cdiDir, "cdi-dir", os.Getenv(cdi.EnvCDIDir), "hack/build-cdi.sh's folder (its CRDs)")
	flag.StringVar(&imagesDir, "cdi-images-dir", os.Getenv(cdi.EnvImagesDir), "hack/build-cdi-images.sh's folder")
	flag.StringVar(&localPathDir, "local-path-dir", os.Getenv(localpath.EnvDir), "hack/build-local-path.sh's folder")
	flag.StringVar(&volumes, "volumes", "", "the folder on the node for local-path's volumes")
	flag.Parse()
	if kubeconfig == "" || cdiDir == "" || imagesDir == "" || localPathDir == "" || volumes == "" {
		return fmt.Errorf("--kubeconfig, --cdi-dir, --cdi-images-dir, --local-path-dir and --volumes are needed")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	lp, err := localpath.LoadBuild(localPathDir)
	if err != nil {
		return err
	}
	b, err := cdi.LoadBuild(imagesDir, filepath.Join(cdiDir, "crds"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	line, err := cdi.InstallWithStorage(ctx, cfg, cdi.StorageInstall{CDI: b, LocalPath: lp, Volumes: volumes, Logf: logf})
	if err != nil {
		return err
	}
	fmt.Println(line)
	return nil
}
