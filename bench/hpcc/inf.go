package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
	"k8s.io/apimachinery/pkg/api/resource"
)

const infUsage = `usage: hpcc inf -tasks N -memory-per-task QUANTITY [flags]
       hpcc inf -update JOB.yaml...

Writes an hpccinf.txt on stdout: HPL's grid P×Q = tasks, as square as possible with P ≤ Q, and
HPL's N the largest multiple of -nb whose matrix (8N² bytes) uses at most -memory-fraction of the
job's memory (tasks × memory per task) and whose HPL work per task (2N³/3/tasks flops) is at most
-max-gflop-per-task, but at least 1000 rounded up to a multiple of -nb; -n sets N as it is. Every
other line is HPCC's example input's. Line 2 says which rule chose N.

With -update, each JOB.yaml holds an HPCJob and a ConfigMap whose data.hpccinf.txt is a literal
block ("hpccinf.txt: |"); that block is rewritten for the HPCJob's spec.tasks and
spec.taskResources.memory under the default rules (how examples/ is generated: make
hpcc-examples).

flags:
`

// sizingFlags are the flags -update refuses: an example's sizing comes from its HPCJob and the
// default rules, so that the drift test regenerates exactly what is committed.
var sizingFlags = []string{"tasks", "memory-per-task", "memory-fraction", "max-gflop-per-task", "nb", "n"}

func runInf(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hpcc inf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), infUsage); fs.PrintDefaults() }
	s := hpcc.DefaultSizing(0, 0)
	fs.IntVar(&s.Tasks, "tasks", 0, "MPI processes (the HPCJob's spec.tasks); P×Q equals it")
	memory := fs.String("memory-per-task", "", "memory of one task as a Kubernetes quantity (the HPCJob's spec.taskResources.memory), e.g. 1Gi")
	fs.Float64Var(&s.MemoryFraction, "memory-fraction", hpcc.DefaultMemoryFraction, "share of the job's memory HPL's matrix may use; HPCC's other tests use about as much again")
	fs.Float64Var(&s.MaxGFLOPPerTask, "max-gflop-per-task", hpcc.DefaultMaxGFLOPPerTask, "cap on HPL's work per task in GFLOP, so small runs end in seconds; 0: no cap (fill memory, for real measurements)")
	fs.IntVar(&s.NB, "nb", hpcc.DefaultNB, "HPL block size")
	fs.IntVar(&s.N, "n", 0, "HPL matrix order as it is (0: size it from memory and work)")
	update := fs.Bool("update", false, "rewrite the hpccinf.txt ConfigMap of each HPCJob file given")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *update {
		return updateFiles(fs, stdout, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hpcc inf: unexpected arguments %q: files are read only with -update\n", fs.Args())
		return 2
	}
	if s.Tasks < 1 {
		fmt.Fprintln(stderr, "hpcc inf: -tasks is required: the number of MPI processes (the HPCJob's spec.tasks)")
		return 2
	}
	if *memory != "" {
		q, err := resource.ParseQuantity(*memory)
		if err != nil {
			fmt.Fprintf(stderr, "hpcc inf: -memory-per-task %q: %v (write it as in a pod spec, e.g. 1Gi or 512Mi)\n", *memory, err)
			return 2
		}
		s.MemoryPerTask = q.Value()
	}
	in, err := hpcc.Size(s)
	if err != nil {
		fmt.Fprintf(stderr, "hpcc inf: %v\n", err)
		return 2
	}
	if _, err := in.WriteTo(stdout); err != nil {
		fmt.Fprintf(stderr, "hpcc inf: %v\n", err)
		return 1
	}
	return 0
}

// updateFiles rewrites the hpccinf.txt ConfigMap of every file named on the command line.
func updateFiles(fs *flag.FlagSet, stdout, stderr io.Writer) int {
	var misused []string
	fs.Visit(func(f *flag.Flag) {
		for _, name := range sizingFlags {
			if f.Name == name {
				misused = append(misused, "-"+name)
			}
		}
	})
	switch {
	case len(misused) > 0:
		fmt.Fprintf(stderr, "hpcc inf: -update takes the sizing from each HPCJob and the default rules, not from %v: change the job's spec.tasks or spec.taskResources.memory instead\n", misused)
		return 2
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "hpcc inf: -update needs the HPCJob files to rewrite, e.g. examples/hpcc-*.yaml")
		return 2
	}
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "hpcc inf: %v\n", err)
			return 1
		}
		out, in, err := updateExample(data, path)
		if err != nil {
			fmt.Fprintf(stderr, "hpcc inf: %v\n", err)
			return 1
		}
		state := "unchanged"
		if !bytes.Equal(out, data) {
			if err := os.WriteFile(path, out, 0o644); err != nil {
				fmt.Fprintf(stderr, "hpcc inf: %v\n", err)
				return 1
			}
			state = "updated"
		}
		fmt.Fprintf(stdout, "%s %s: %s\n", state, path, in.Note)
	}
	return 0
}
