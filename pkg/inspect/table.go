package inspect

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the view for people: a header line, the NUMA nodes' free CPUs, then every
// container with its pool and CPUs. now dates the NodeResourceTopology's last update.
func WriteTable(w io.Writer, v Pins, now time.Time) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Node %s (from %s): generation %d, shared pool %s", orDash(v.Node), v.Source, v.Generation, cpusOrNone(v.SharedCPUs))
	if v.ReservedCPUs != "" {
		fmt.Fprintf(bw, ", reserved %s", v.ReservedCPUs)
	}
	bw.WriteByte('\n')
	if v.UpdatedAt != nil {
		fmt.Fprintf(bw, "  updated %s ago (%s)\n", now.Sub(*v.UpdatedAt).Round(time.Second), v.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if v.Fingerprint != "" {
		fmt.Fprintf(bw, "  pods fingerprint %s\n", v.Fingerprint)
	}
	if len(v.Paths) > 0 {
		fmt.Fprintf(bw, "  new containers found through %s\n", strings.Join(v.Paths, ", "))
	}
	if p := v.Published; p != nil {
		switch {
		case p.Error != "":
			fmt.Fprintf(bw, "  NodeResourceTopology NOT up to date: %s\n", p.Error)
		case !p.At.IsZero():
			fmt.Fprintf(bw, "  NodeResourceTopology published generation %d %s ago\n", p.Generation, now.Sub(p.At).Round(time.Millisecond))
		default:
			fmt.Fprintf(bw, "  NodeResourceTopology not published yet\n")
		}
	}
	bw.WriteByte('\n')

	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NUMA NODE\tCPUS\tALLOCATABLE\tFREE\tFREE CORES\tAVAILABLE\tFREE CPUS")
	for _, n := range v.NUMANodes {
		cores := "-"
		if n.FreeCores != nil {
			cores = strconv.Itoa(*n.FreeCores)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%d\t%s\n", n.ID, n.Capacity, n.Allocatable, n.Free, cores, n.Available, cpusOrNone(n.FreeCPUs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	bw.WriteByte('\n')

	tw = tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tCONTAINER\tPOOL\tCPUS\tMEMS\tNUMA NODE")
	shared := false
	for _, c := range v.Containers {
		numa := "-"
		if c.NUMANode != nil {
			numa = strconv.Itoa(*c.NUMANode)
		}
		shared = shared || c.Pool == PoolShared
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.PodLabel(), c.Container, c.Pool, cpusOrNone(c.CPUs), orDash(c.Mems), numa)
	}
	if !shared {
		fmt.Fprintf(tw, "(every other container)\t\t%s\t%s\t-\t-\n", PoolShared, cpusOrNone(v.SharedCPUs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cpusOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
