package pinning

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Context describes the circumstances of a measurement for the report; context.json keeps it
// beside samples.json, so that reports can be merged later (Merge).
type Context struct {
	Command string `json:"command"`
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the end: the machine may be
	// shared, and the report should say how busy it was.
	LoadBefore string `json:"loadBefore"`
	LoadAfter  string `json:"loadAfter"`
	CPUs       int    `json:"cpus"`
	Ranks      int    `json:"ranks"`
	// Entry says how processes entered their cgroups (see EntryMethod); empty leaves it out.
	Entry string `json:"entry,omitempty"`
	// Notes say what was left out and why, and anything else a reader of the table must know.
	Notes []string `json:"notes,omitempty"`
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
// stdout: the rows and the markdown first (markdown), then the JSON files, then one plot per
// benchmark and way of running (addPlots).
func Report(samples []Sample, o Options, ctx Context, stdout io.Writer) error {
	rows, err := Summarize(samples, o.Scenarios, o.Benchmarks)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return fmt.Errorf("create report directory: %w", err)
	}
	md := markdown(rows, o, ctx)
	files := map[string][]byte{"pinning.md": []byte(md)}
	for name, v := range map[string]any{"pinning.json": rows, "samples.json": samples, "context.json": ctx} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		files[name] = append(data, '\n')
	}
	plots, err := addPlots(files, rows, o, ctx)
	if err != nil {
		return err
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
	_, err = fmt.Fprintf(stdout, "%s\nwritten to %s: pinning.md, pinning.json, samples.json, context.json, %s\n",
		md, o.OutDir, strings.Join(plots, ", "))
	return err
}

// markdown is pinning.md: the command, the machine and its load, the notes, then the table.
func markdown(rows []Row, o Options, ctx Context) string {
	var md strings.Builder
	fmt.Fprintf(&md, "Command: `%s`  \n", ctx.Command)
	fmt.Fprintf(&md, "%d online CPUs, %d rank(s) per scenario, %d run(s) each, scenarios interleaved; load average before %s, after %s.\n\n",
		ctx.CPUs, ctx.Ranks, o.Repeats, ctx.LoadBefore, ctx.LoadAfter)
	if ctx.Entry != "" {
		fmt.Fprintf(&md, "Ranks and neighbour: %s.\n\n", ctx.Entry)
	}
	for _, n := range ctx.Notes {
		fmt.Fprintf(&md, "- %s\n", n)
	}
	if len(ctx.Notes) > 0 {
		md.WriteString("\n")
	}
	WriteMarkdown(&md, rows)
	return md.String()
}

// addPlots adds to files one PNG per benchmark (per way of running, when the rows hold more
// than one) and returns their names in row order.
func addPlots(files map[string][]byte, rows []Row, o Options, ctx Context) ([]string, error) {
	vias := map[string]bool{}
	for _, r := range rows {
		vias[r.Via] = true
	}
	var plots []string
	for _, r := range rows {
		name := r.Benchmark + ".png"
		if len(vias) > 1 {
			name = r.Via + "-" + name
		}
		if _, done := files[name]; done {
			continue
		}
		var sub []Row
		for _, x := range rows {
			if x.Via == r.Via && x.Benchmark == r.Benchmark {
				sub = append(sub, x)
			}
		}
		var png strings.Builder
		title := fmt.Sprintf("EP-%s (%s), %d rank(s): median of %d runs, whiskers min-max", strings.ToUpper(r.Benchmark), r.Via, ctx.Ranks, o.Repeats)
		if err := WritePlot(&png, title, sub); err != nil {
			return nil, err
		}
		files[name] = []byte(png.String())
		plots = append(plots, name)
	}
	return plots, nil
}
