package main

import (
	"fmt"
	"os"
	"time"

	"platform.example/vm-migration/test/framework"
)

func main() {
	var opts []framework.Option
	if len(os.Args) > 1 {
		opts = append(opts, framework.WithNode())
	} else {
		opts = append(opts, framework.WithControllerManager())
	}
	env, err := framework.Start(opts...)
	if err != nil {
		panic(err)
	}
	time.Sleep(3 * time.Second)
	t := time.Now()
	env.Stop()
	fmt.Println("stop", time.Since(t))
}
