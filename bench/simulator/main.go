// Command simulator replays a workload of MPI jobs through finegrain's real placer code and the
// node agent's real allocator on simulated clusters, next to models of default Kubernetes, and
// prints per strategy the response time, wait, makespan and utilisation (markdown, or JSON with
// -o json). The runtime model and its defaults are in docs/simulator.md.
//
//	go run ./bench/simulator [-nodes 4,16] [-jobs-per-node 25] [-seed 1] [-load 0.7]
//	go run ./bench/simulator -trace bench/simulator/testdata/paper-mix.yaml -nodes 4
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	o, err := parseOptions(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulator:", err)
		os.Exit(2)
	}
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "simulator:", err)
		os.Exit(1)
	}
}
