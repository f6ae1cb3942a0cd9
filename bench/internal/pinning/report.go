package pinning

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Context describes the circumstances of a measurement for the report.
type Context struct {
	Command string
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the end: the machine may be
	// shared, and the report should say how busy it was.
	LoadBefore, LoadAfter string
	CPUs                  int
	Ranks                 int
	// Entry says how processes entered their cgroups (see EntryMethod); empty leaves it out.
	Entry string
}

// LoadAvg reads the first three fields of <procRoot>/loadavg.
func LoadAvg(procRoot string) string {
	b, err := os.ReadFile(filepath.Join(procRoot, "loadavg"))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Report summarises the samples, writes pinning.md, pinning.json, samples.json and one PNG
// per benchmark into o.OutDir, and prints the table (or, with o.Output json, the rows) on
// stdout.
func Report(samples []Sample, o Options, ctx Context, stdout io.Writer) error {
	rows, err := Summarize(samples, o.Scenarios, o.Benchmarks)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return fmt.Errorf("create report directory: %w", err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "Command: `%s`  \n", ctx.Command)
	fmt.Fprintf(&md, "%d online CPUs, %d rank(s) per scenario, %d run(s) each, scenarios interleaved; load average before %s, after %s.\n\n",
		ctx.CPUs, ctx.Ranks, o.Repeats, ctx.LoadBefore, ctx.LoadAfter)
	if ctx.Entry != "" {
		fmt.Fprintf(&md, "Ranks and neighbour: %s.\n\n", ctx.Entry)
	}
	WriteMarkdown(&md, rows)
	rowsJSON, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	samplesJSON, err := json.MarshalIndent(samples, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"pinning.md":   []byte(md.String()),
		"pinning.json": append(rowsJSON, '\n'),
		"samples.json": append(samplesJSON, '\n'),
	}
	for _, bm := range o.Benchmarks {
		var sub []Row
		for _, r := range rows {
			if r.Benchmark == bm {
				sub = append(sub, r)
			}
		}
		var png strings.Builder
		title := fmt.Sprintf("EP-%s, %d rank(s): median of %d runs, whiskers min-max", strings.ToUpper(bm), ctx.Ranks, o.Repeats)
		if err := WritePlot(&png, title, sub); err != nil {
			return err
		}
		files[bm+".png"] = []byte(png.String())
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(o.OutDir, name), data, 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if o.Output == "json" {
		_, err = stdout.Write(files["pinning.json"])
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\nwritten to %s: pinning.md, pinning.json, samples.json, %s.png\n",
		md.String(), o.OutDir, strings.Join(o.Benchmarks, ".png, "))
	return err
}
