package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// csvColumns are the columns a CSV trace may have, in the order EncodeCSV writes them.
var csvColumns = []string{
	"name", "arrival", "runtime", "tasks", "profile", "granularity", "workers", "cpu", "memory",
	"priority", "placement", "exclusiveNodes", "timeoutSeconds",
}

// csvRequired are the columns every CSV trace needs.
var csvRequired = []string{"arrival", "runtime", "tasks", "cpu"}

// DecodeCSV reads a CSV trace: a header naming columns (any order, each at most once, from
// name, arrival, runtime, tasks, profile, granularity, workers, cpu, memory, priority,
// placement, exclusiveNodes, timeoutSeconds; arrival, runtime, tasks and cpu required), then
// one job per row; lines starting with # are comments and an empty cell takes the field's
// default. Errors name the line, the job and the column.
func DecodeCSV(r io.Reader, source string) ([]Job, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read trace %s: empty; want a header line naming the columns", source)
	}
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", source, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if !slices.Contains(csvColumns, h) {
			return nil, fmt.Errorf("read trace %s: header column %d %q is not one of %s", source, i+1, h, strings.Join(csvColumns, ", "))
		}
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("read trace %s: header names column %q twice", source, h)
		}
		col[h] = i
	}
	for _, c := range csvRequired {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("read trace %s: header lacks the required column %q (required: %s)", source, c, strings.Join(csvRequired, ", "))
		}
	}
	var jobs []Job
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", source, err)
		}
		if len(jobs) == MaxJobs {
			return nil, fmt.Errorf("read trace %s: more than the %d jobs a trace may hold", source, MaxJobs)
		}
		line, _ := cr.FieldPos(0)
		t, err := csvJob(rec, col)
		if err != nil {
			name := cell(rec, col, "name")
			if name == "" {
				name = "job-" + strconv.Itoa(len(jobs)+1)
			}
			return nil, fmt.Errorf("read trace %s line %d (job %s): %w", source, line, name, err)
		}
		j, err := t.job(len(jobs))
		if err != nil {
			return nil, fmt.Errorf("read trace %s line %d: %w", source, line, err)
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("read trace %s: no jobs after the header", source)
	}
	if err := finish(jobs); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", source, err)
	}
	return jobs, nil
}

func cell(rec []string, col map[string]int, name string) string {
	i, ok := col[name]
	if !ok || i >= len(rec) {
		return ""
	}
	return strings.TrimSpace(rec[i])
}

// csvJob converts one row.
func csvJob(rec []string, col map[string]int) (traceJob, error) {
	var t traceJob
	var errs []error
	get := func(name string) string { return cell(rec, col, name) }
	dur := func(name string) *Duration {
		v := get(name)
		if v == "" {
			return nil
		}
		d, err := parseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("column %s: %w", name, err))
			return nil
		}
		dd := Duration(d)
		return &dd
	}
	i32 := func(name string) int32 {
		v := get(name)
		if v == "" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("column %s: %q is not a whole number", name, v))
		}
		return int32(n)
	}
	qty := func(name string) resource.Quantity {
		v := get(name)
		if v == "" {
			return resource.Quantity{}
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("column %s: %q is not a quantity (\"1\", \"2Gi\")", name, v))
		}
		return q
	}
	t.Name = get("name")
	t.Arrival, t.Runtime = dur("arrival"), dur("runtime")
	t.Tasks, t.Workers, t.Priority = i32("tasks"), i32("workers"), i32("priority")
	t.Profile = v1alpha1.Profile(get("profile"))
	t.Granularity = v1alpha1.Granularity(get("granularity"))
	t.Placement = v1alpha1.PlacementPolicy(get("placement"))
	t.TaskResources = v1alpha1.TaskResources{CPU: qty("cpu"), Memory: qty("memory")}
	if v := get("exclusiveNodes"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("column exclusiveNodes: %q is not true or false", v))
		}
		t.ExclusiveNodes = b
	}
	if get("timeoutSeconds") != "" {
		t.Gang = &traceGang{TimeoutSeconds: i32("timeoutSeconds")}
	}
	return t, errors.Join(errs...)
}

// EncodeCSV writes jobs in the CSV trace format DecodeCSV reads.
func EncodeCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns); err != nil {
		return err
	}
	secs := func(d Duration) string { b, _ := d.MarshalJSON(); return string(b) }
	for i := range jobs {
		j := &jobs[i]
		s := &j.Spec
		mem := ""
		if !s.TaskResources.Memory.IsZero() {
			mem = s.TaskResources.Memory.String()
		}
		rec := []string{
			j.Name, secs(Duration(j.Arrival)), secs(Duration(j.Runtime)), strconv.Itoa(int(s.Tasks)),
			string(s.Profile), string(s.Granularity), strconv.Itoa(int(s.Workers)), s.TaskResources.CPU.String(), mem,
			strconv.Itoa(int(ptr.Deref(s.Priority, 0))), string(s.Placement), strconv.FormatBool(s.ExclusiveNodes),
			strconv.Itoa(int(s.Gang.TimeoutSeconds)),
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
