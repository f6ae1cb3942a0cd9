// Command pause is the sandbox process of every pod on the local cluster (containerd's
// sandbox_image) and the idle workload of the e2e tests. It does nothing until SIGINT or SIGTERM,
// then exits 0; as PID 1 of a pod's PID namespace it reaps the orphans re-parented to it, so no
// zombies pile up.
package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() { run(nil) }

// run handles signals until SIGINT or SIGTERM, calling ready (when given) once the handlers are
// in place.
func run(ready func()) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	if ready != nil {
		ready()
	}
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
