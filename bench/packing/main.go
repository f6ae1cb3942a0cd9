// Command packing compares finegrain's exclusive-core allocator (pkg/policy) with a model of the
// kubelet static CPU manager's packing rule (takeByTopologyNUMAPacked under the single-numa-node
// topology-manager policy) on seeded random request/release streams over the machines of
// pkg/topology/testdata (one sysfs tree captured, the others generated from documented layouts)
// and synthetic ones, and prints a markdown table: how many requests each admits inside one NUMA
// node, how many it refuses although the machine had room (fragmentation), how many grants
// straddle more L3 groups than needed, and the CPU utilisation reached.
//
//	go run ./bench/packing [-seeds 10] [-arrivals 2000] [-load 1.5] [-fixtures pkg/topology/testdata]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/finegrain-dev/finegrain/pkg/policy"
	"github.com/finegrain-dev/finegrain/pkg/topology"
)

type options struct {
	seeds    int
	arrivals int
	load     float64
	fixtures string
}

func main() {
	var o options
	fs := flag.NewFlagSet("packing", flag.ExitOnError)
	fs.IntVar(&o.seeds, "seeds", 10, "random streams per machine and stream kind")
	fs.IntVar(&o.arrivals, "arrivals", 2000, "requests per stream")
	fs.Float64Var(&o.load, "load", 1.5, "offered load: mean request size × mean lifetime / allocatable CPUs")
	fs.StringVar(&o.fixtures, "fixtures", filepath.Join("pkg", "topology", "testdata"), "directory of sysfs trees, captured or generated (pkg/topology/testdata)")
	fs.Parse(os.Args[1:])
	if err := compare(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "packing:", err)
		os.Exit(1)
	}
}

// machine is one topology under comparison.
type machine struct {
	name string
	topo *topology.Topology
}

// fixtureNames are the fixture machines (generated sysfs trees) with enough CPUs to pin anything.
var fixtureNames = []string{
	"xeon-e5-2697v4-2s",
	"xeon-gold-6248-2s-smt",
	"epyc-7451-2s-smt",
	"xeon-max-9480-2s-hbm-flat",
	"xeon-e2278g-offline-isolcpus",
}

var syntheticShapes = []struct {
	name  string
	shape topology.Shape
}{
	{"synthetic 2s×4 NUMA, 2 L3×8 cores, SMT2", topology.Shape{Sockets: 2, NUMAPerSocket: 4, L3PerNUMA: 2, CoresPerL3: 8, ThreadsPerCore: 2}},
	{"synthetic 2s×1 NUMA, 12 L3×8 cores, SMT2", topology.Shape{Sockets: 2, NUMAPerSocket: 1, L3PerNUMA: 12, CoresPerL3: 8, ThreadsPerCore: 2}},
}

func machines(fixtureDir string) ([]machine, error) {
	var out []machine
	for _, name := range fixtureNames {
		topo, err := topology.Discover(filepath.Join(fixtureDir, name, "sys"))
		if err != nil {
			return nil, fmt.Errorf("fixture %s: %w", name, err)
		}
		out = append(out, machine{name, topo})
	}
	for _, s := range syntheticShapes {
		topo, err := topology.Synthetic(s.shape)
		if err != nil {
			return nil, err
		}
		out = append(out, machine{s.name, topo})
	}
	return out, nil
}

// result is one table row: one machine, one stream kind, both packers over every seed.
type result struct {
	machine, kind      string
	cpus               int
	finegrain, kubelet stats
	sizeLimit          int
}

func compare(w io.Writer, o options) error {
	ms, err := machines(o.fixtures)
	if err != nil {
		return err
	}
	var rows []result
	for _, m := range ms {
		for _, whole := range []bool{true, false} {
			if whole && m.topo.ThreadsPerCore() == 1 {
				continue // without SMT both kinds are the same stream
			}
			r, err := compareOn(m, whole, o)
			if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			rows = append(rows, r)
		}
	}
	return writeTable(w, rows, o)
}

// compareOn runs both packers over o.seeds streams on one machine. The reserved pool is the first
// core (all its threads), the shared pool keeps at least one more CPU.
func compareOn(m machine, whole bool, o options) (result, error) {
	reserved := m.topo.Siblings(m.topo.OnlineCPUs.List()[0])
	const minShared = 1
	probe, err := policy.New(m.topo, policy.Config{ReservedCPUs: reserved, MinSharedCPUs: minShared})
	if err != nil {
		return result{}, err
	}
	capacity := m.topo.NumCPUs() - reserved.Size()
	sizeLimit := 0
	for _, f := range probe.Free() {
		if whole {
			sizeLimit = max(sizeLimit, f.AvailableAligned)
		} else {
			sizeLimit = max(sizeLimit, f.Available)
		}
	}
	unit, kind := 1, "any size, cores may split"
	if whole {
		unit, kind = m.topo.ThreadsPerCore(), "whole cores only"
	}
	res := result{machine: m.name, kind: kind, cpus: m.topo.NumCPUs(), sizeLimit: sizeLimit}
	for seed := 0; seed < o.seeds; seed++ {
		stream := makeStream(streamSpec{seed: uint64(seed), arrivals: o.arrivals, maxSize: sizeLimit, unit: unit, load: o.load, capacity: capacity})
		a, err := policy.New(m.topo, policy.Config{ReservedCPUs: reserved, MinSharedCPUs: minShared})
		if err != nil {
			return result{}, err
		}
		fg, err := run(&finegrainPacker{a: a, split: !whole}, m.topo, stream, capacity)
		if err != nil {
			return result{}, fmt.Errorf("finegrain, seed %d: %w", seed, err)
		}
		kl, err := run(newKubeletPacker(m.topo, reserved.List(), minShared, whole), m.topo, stream, capacity)
		if err != nil {
			return result{}, fmt.Errorf("kubelet model, seed %d: %w", seed, err)
		}
		res.finegrain.add(fg)
		res.kubelet.add(kl)
	}
	return res, nil
}

func writeTable(w io.Writer, rows []result, o options) error {
	pct := func(a, b int) string { return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(max(b, 1))) }
	fmt.Fprintf(w, "Packing inside one NUMA node: finegrain (pkg/policy) vs the kubelet static policy's takeByTopologyNUMAPacked under single-numa-node.\n")
	fmt.Fprintf(w, "%d seeded streams × %d requests per row, offered load %.1f, one arrival per tick; reserved = first core, shared pool ≥ 1 CPU for both.\n\n", o.seeds, o.arrivals, o.load)
	fmt.Fprintln(w, "| machine | CPUs | requests | largest request | admitted finegrain | admitted kubelet | Δ admitted | refused with room fg / kubelet | grants over extra L3 fg / kubelet | CPU utilisation fg / kubelet |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fg, kl := r.finegrain, r.kubelet
		fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %d | %+.1f %% | %d / %d | %s / %s | %s / %s |\n",
			r.machine, r.cpus, r.kind, r.sizeLimit, fg.admitted, kl.admitted,
			100*float64(fg.admitted-kl.admitted)/float64(max(kl.admitted, 1)),
			fg.refusedWithRoom, kl.refusedWithRoom,
			pct(fg.l3Extra, fg.admitted), pct(kl.l3Extra, kl.admitted),
			pct(fg.heldCPUTicks, fg.capacityTicks), pct(kl.heldCPUTicks, kl.capacityTicks))
	}
	return nil
}
