// Command build-images builds the images make run-local imports into its
// node (package images): the controller's image, as make image builds it,
// the simulated conversion image and the launcher image the KubeVirt
// stand-in runs instances with. It prints one line per image,
// "<reference> <tarball>".
//
//	build-images [--controller REF] [--simulated-conversion REF] [--launcher REF]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"platform.example/vm-migration/test/framework"
	"platform.example/vm-migration/test/images"
)

func main() {
	controller := flag.String("controller", images.ControllerReference, "reference of the controller's image")
	conversion := flag.String("simulated-conversion", images.SimulatedConversionReference, "reference of the simulated conversion image")
	launcher := flag.String("launcher", images.LauncherReference, "reference of the launcher image")
	flag.Parse()
	ctx := context.Background()
	for _, build := range []func() (*framework.BuiltImage, error){
		func() (*framework.BuiltImage, error) { return images.Controller(ctx, *controller) },
		func() (*framework.BuiltImage, error) { return images.SimulatedConversion(ctx, *conversion) },
		func() (*framework.BuiltImage, error) { return images.Launcher(ctx, *launcher) },
	} {
		img, err := build()
		if err != nil {
			fmt.Fprintln(os.Stderr, "build-images:", err)
			os.Exit(1)
		}
		fmt.Println(img.Reference, img.Tarball)
	}
}
