// Command image builds the controller's OCI image without a container
// engine, with go-containerregistry: the controller and vm-transfer (static
// binaries built beforehand) on an empty base with CA certificates and a
// passwd entry for the non-root user 65532, an SPDX SBOM inside, OCI labels,
// written as an OCI image layout and as a tarball that docker/podman load
// and crane push take. make image runs it.
//
//	go run ./hack/image --bin-dir _output/image/bin --out _output/image \
//	  --image platform.example/vm-migration-controller:dev
//
// With --rootfs it packages the conversion image instead
// (make conversion-image, hack/conversion-image/build.sh): a root file
// system tar of Debian packages as one layer, checked to hold what the
// conversion Job needs, an SBOM of its Debian packages (from its dpkg
// status), user 107 and libguestfs' fixed appliance in the environment
// (docs/operators/conversion-image.md).
//
//	go run ./hack/image --rootfs rootfs.tar --out _output/conversion-image \
//	  --image platform.example/vm-migration-conversion:dev
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
		build := Build
		if opts.Rootfs != "" {
			build = BuildConversion
		}
		var res *Result
		res, err = build(opts)
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
	fs.StringVar(&o.Rootfs, "rootfs", "", "root file system tar of the conversion image (hack/conversion-image/build.sh): build that image instead of the controller's")
	fs.StringVar(&o.OutDir, "out", "_output/image", "directory to write the OCI layout (oci/), the tarball and the SBOM into")
	fs.StringVar(&o.Reference, "image", "platform.example/vm-migration-controller:dev", "image reference (repository:tag) recorded in the layout and the tarball")
	fs.StringVar(&o.Version, "version", "dev", "version label (org.opencontainers.image.version)")
	fs.StringVar(&o.Revision, "revision", "", "source revision label (org.opencontainers.image.revision)")
	fs.StringVar(&o.CACertificates, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to ship")
	fs.Int64Var(&epoch, "source-date-epoch", 0, "Unix time of every file and of the image (reproducible builds); 0: SOURCE_DATE_EPOCH, else the Unix epoch")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if (o.BinDir == "") == (o.Rootfs == "") {
		return o, fmt.Errorf("exactly one of --bin-dir (the controller image) and --rootfs (the conversion image) is required")
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
