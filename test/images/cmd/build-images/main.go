// Command build-images builds the images make run-local imports into its
// node (package images): the controller's image, as make image builds it,
// and the simulated conversion image. It prints one line per image,
// "<reference> <tarball>".
//
//	build-images [--controller REF] [--simulated-conversion REF]
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
	flag.Parse()
	ctx := context.Background()
	for _, build := range []func() (*framework.BuiltImage, error){
		func() (*framework.BuiltImage, error) { return images.Controller(ctx, *controller) },
		func() (*framework.BuiltImage, error) { return images.SimulatedConversion(ctx, *conversion) },
	} {
		img, err := build()
		if err != nil {
			fmt.Fprintln(os.Stderr, "build-images:", err)
			os.Exit(1)
		}
		fmt.Println(img.Reference, img.Tarball)
	}
}
