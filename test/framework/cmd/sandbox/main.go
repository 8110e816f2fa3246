// Command sandbox is the test node's sandbox (pause) process and the
// holder of its namespaces: it does nothing but wait, reaping every child
// that ends (as the init of a PID namespace it inherits orphans), and exits
// 0 on SIGTERM, SIGINT or SIGHUP.
//
// test/framework builds it, static, into the sandbox image containerd
// starts for every pod, and runs the same binary as process 1 of the
// node's PID namespace, so that when it ends the kernel ends every process
// of the node.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every child that has ended, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
