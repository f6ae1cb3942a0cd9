package result

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints a run for people: the throughput of each process and the total, then where
// the processes ran and what the counters saw, then why any counter is missing.
func WriteTable(w io.Writer, r Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d process(es)", r.Benchmark, len(r.Processes))
	if r.Backend != "" {
		fmt.Fprintf(&b, ", %s", r.Backend)
	}
	p0 := r.Processes[0]
	if p0.DGEMM != nil {
		fmt.Fprintf(&b, ", n=%d", p0.DGEMM.N)
	}
	if p0.STREAM != nil {
		fmt.Fprintf(&b, ", %d elements (%.0f MiB) per array, best of %d", p0.STREAM.ArrayLen, float64(p0.STREAM.ArrayLen)*8/(1<<20), p0.STREAM.NTimes-1)
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	throughputTable(tw, r)
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	placementTable(tw, r)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Total.Counters {
		if c.Unavailable != "" {
			fmt.Fprintf(&b, "n/a %s\n", c.Unavailable)
		}
	}
	if scaledAny(r.Total.Counters) {
		b.WriteString("* scaled: the kernel multiplexed the counter and the value was extrapolated\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func throughputTable(tw io.Writer, r Run) {
	head := []string{"rank", "pid", r.Unit + " sustained", "best", "seconds"}
	if r.Benchmark == BenchDGEMM {
		head = append(head, "products", "check")
	} else {
		head = append(head, "copy best", "scale best", "add best", "triad best")
	}
	row(tw, head...)
	for _, p := range r.Processes {
		cells := []string{strconv.Itoa(p.Rank), strconv.Itoa(p.PID), f2(p.Rate), f2(p.BestRate), f2(p.Seconds)}
		if p.DGEMM != nil {
			cells = append(cells, strconv.Itoa(p.DGEMM.Reps), fmt.Sprintf("%.2g", p.DGEMM.Check))
		}
		if p.STREAM != nil {
			for _, k := range p.STREAM.Kernels {
				cells = append(cells, f2(k.BestGBs))
			}
		}
		row(tw, cells...)
	}
	row(tw, "total", "", f2(r.Total.Rate), f2(r.Total.BestRate))
}

func placementTable(tw io.Writer, r Run) {
	head := []string{"rank", "affinity@init", "affinity@start", "ran on", "vol cs", "invol cs"}
	for _, c := range r.Total.Counters {
		if c.Unit == "ns" {
			head = append(head, c.Name+" ms")
		} else {
			head = append(head, c.Name)
		}
	}
	row(tw, head...)
	for _, p := range r.Processes {
		cells := []string{strconv.Itoa(p.Rank), p.AffinityAtInit, p.AffinityAtStart, p.RanOn,
			strconv.FormatUint(p.VoluntarySwitches, 10), strconv.FormatUint(p.InvoluntarySwitches, 10)}
		row(tw, append(cells, counterCells(r.Total.Counters, p.Counters)...)...)
	}
	cells := []string{"total", "", "", r.Total.RanOn,
		strconv.FormatUint(r.Total.VoluntarySwitches, 10), strconv.FormatUint(r.Total.InvoluntarySwitches, 10)}
	row(tw, append(cells, counterCells(r.Total.Counters, r.Total.Counters)...)...)
}

// counterCells formats have in the column order of cols.
func counterCells(cols, have []Counter) []string {
	out := make([]string, 0, len(cols))
	for _, col := range cols {
		cell := "-"
		for _, c := range have {
			if c.Name == col.Name {
				cell = CounterString(c)
			}
		}
		out = append(out, cell)
	}
	return out
}

// CounterString formats a counter value: "n/a" when unavailable, milliseconds for
// nanosecond counters, a trailing "*" when the value was extrapolated.
func CounterString(c Counter) string {
	if c.Value == nil {
		return "n/a"
	}
	s := strconv.FormatUint(*c.Value, 10)
	if c.Unit == "ns" {
		s = fmt.Sprintf("%.1f", float64(*c.Value)/1e6)
	}
	if c.Scaled {
		s += "*"
	}
	return s
}

func scaledAny(cs []Counter) bool {
	for _, c := range cs {
		if c.Scaled {
			return true
		}
	}
	return false
}

func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
}

func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
