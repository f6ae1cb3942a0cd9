// Command hpcc reads and writes the files of the HPC Challenge benchmark for finegrain's HPCC
// jobs (examples/):
//
//	go run ./bench/hpcc parse [-o table|json] [-allow-failure] [FILE]   # hpccoutf.txt or a log holding it; stdin without FILE
//	go run ./bench/hpcc inf -tasks 16 -memory-per-task 1Gi              # an hpccinf.txt sized for the job
//	go run ./bench/hpcc inf -update examples/hpcc-*.yaml                # regenerate the examples' ConfigMaps
//
// The formats and the sizing rules are internal/hpcc's.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: hpcc parse|inf [flags] [FILE...]

  parse  print the headline figures (EP-DGEMM, EP-STREAM, G-RandomRing, G-FFT, Success) and every
         key of each run's summary in an hpccoutf.txt, or in any text holding one such as the
         launcher's log (kubectl logs JOB-launcher | hpcc parse); stdin without FILE
  inf    write an hpccinf.txt for -tasks MPI processes of -memory-per-task each; with -update,
         rewrite the hpccinf.txt ConfigMap of each HPCJob file from its tasks and memory

"hpcc parse -h" and "hpcc inf -h" list the flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command; it returns the exit status: 0 done, 1 failed, 2 misused.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "parse":
		return runParse(args[1:], stdin, stdout, stderr)
	case "inf":
		return runInf(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "hpcc: unknown mode %q\n\n%s", args[0], usage)
		return 2
	}
}
