// Command image builds the controller's OCI image without a container
// engine, with go-containerregistry: the controller and vm-transfer (static
// binaries built beforehand) on an empty base with CA certificates and a
// passwd entry for the non-root user 65532, an SPDX SBOM inside, OCI labels,
// written as an OCI image layout and as a tarball that docker/podman load
// and crane push take. make image runs it.
//
//	go run ./hack/image --bin-dir _output/image/bin --out _output/image \
//	  --image platform.example/vm-migration-controller:dev
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err == nil {
		var res *Result
		res, err = Build(opts)
		if err == nil {
			fmt.Printf("image %s (%s)\n  OCI layout: %s\n  tarball:    %s\n  SBOM:       %s\n", opts.Reference, res.Digest, res.LayoutPath, res.TarballPath, res.SBOMPath)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (Options, error) {
	var o Options
	var epoch int64
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.BinDir, "bin-dir", "", "directory holding the static migration-controller and vm-transfer binaries")
	fs.StringVar(&o.OutDir, "out", "_output/image", "directory to write the OCI layout (oci/), the tarball and the SBOM into")
	fs.StringVar(&o.Reference, "image", "platform.example/vm-migration-controller:dev", "image reference (repository:tag) recorded in the layout and the tarball")
	fs.StringVar(&o.Version, "version", "dev", "version label (org.opencontainers.image.version)")
	fs.StringVar(&o.Revision, "revision", "", "source revision label (org.opencontainers.image.revision)")
	fs.StringVar(&o.CACertificates, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to ship")
	fs.Int64Var(&epoch, "source-date-epoch", 0, "Unix time of every file and of the image (reproducible builds); 0: SOURCE_DATE_EPOCH, else the Unix epoch")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.BinDir == "" {
		return o, fmt.Errorf("--bin-dir is required")
	}
	if epoch == 0 {
		if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
			if _, err := fmt.Sscan(v, &epoch); err != nil {
				return o, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a Unix time: %w", v, err)
			}
		}
	}
	o.Created = time.Unix(epoch, 0).UTC()
	return o, nil
}
