package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Limits that keep a trace's simulation bounded.
const (
	// MaxJobs bounds the jobs of one trace.
	MaxJobs = 100_000
	// MaxDuration bounds arrival times and runtimes.
	MaxDuration = 10_000 * time.Hour
	// Namespace is the namespace of every simulated job and pod.
	Namespace = "sim"
)

// Job is one job of a trace: an HPCJob spec, when it is submitted and how long it runs when
// nothing slows it down.
type Job struct {
	Name string
	// Arrival is the submit time, from the start of the simulation.
	Arrival time.Duration
	// Runtime is the base runtime: every factor of the runtime model at 1 (all memory local, no
	// memory-bandwidth saturation, no interference, all ranks talking through shared memory).
	Runtime time.Duration
	// Spec is defaulted and valid; its pod templates are empty (HPCJob fills them).
	Spec v1alpha1.HPCJobSpec
}

// CPUs is the CPUs the job holds while it runs (tasks × CPUs per task).
func (j *Job) CPUs() int { return int(j.Spec.Tasks) * int(j.Spec.TaskResources.CPU.Value()) }

// HPCJob is the job as the placer reads it, with minimal launcher and worker templates.
func (j *Job) HPCJob() *v1alpha1.HPCJob {
	job := &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: Namespace},
		Spec:       j.Spec,
	}
	job.Spec.Launcher = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "launcher", Image: "fgworker"}}}}
	job.Spec.Worker = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "fgworker"}}}}
	return job
}

// Duration is a time span read as seconds (a number) or a Go duration ("90s", "1m30s").
type Duration time.Duration

// UnmarshalJSON reads seconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := parseDuration(s)
		*d = Duration(v)
		return err
	}
	v, err := parseDuration(string(b))
	*d = Duration(v)
	return err
}

// MarshalJSON writes seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(time.Duration(d).Seconds(), 'f', -1, 64)), nil
}

// parseDuration reads seconds ("90", "1.5") or a Go duration ("90s"); it must be finite, not
// negative and at most MaxDuration.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty; give seconds (90) or a duration (\"1m30s\")")
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > MaxDuration.Seconds() {
			return 0, fmt.Errorf("%q seconds: must be between 0 and %v", s, MaxDuration)
		}
		d = time.Duration(math.Round(f * float64(time.Second)))
	} else {
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is neither seconds (90) nor a duration (\"1m30s\")", s)
		}
		d = v
	}
	if d < 0 || d > MaxDuration {
		return 0, fmt.Errorf("%q: must be between 0 and %v", s, MaxDuration)
	}
	return d, nil
}

// traceFile is the YAML/JSON trace format.
type traceFile struct {
	Jobs []traceJob `json:"jobs"`
}

// traceJob is one job as a trace file writes it.
type traceJob struct {
	Name           string                   `json:"name,omitempty"`
	Arrival        *Duration                `json:"arrival"`
	Runtime        *Duration                `json:"runtime"`
	Tasks          int32                    `json:"tasks"`
	Profile        v1alpha1.Profile         `json:"profile,omitempty"`
	Granularity    v1alpha1.Granularity     `json:"granularity,omitempty"`
	Workers        int32                    `json:"workers,omitempty"`
	TaskResources  v1alpha1.TaskResources   `json:"taskResources"`
	Priority       int32                    `json:"priority,omitempty"`
	Placement      v1alpha1.PlacementPolicy `json:"placement,omitempty"`
	ExclusiveNodes bool                     `json:"exclusiveNodes,omitempty"`
	Gang           *traceGang               `json:"gang,omitempty"`
}

// traceGang is the part of the gang policy the simulator honours.
type traceGang struct {
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// DecodeTrace reads a YAML or JSON trace ({"jobs": [...]}) strictly: unknown, duplicate or
// mistyped fields are errors, and so is any job the placer would refuse; every error names the
// job and the field. source names the input in errors. Jobs come back ordered by arrival, file
// order among equal arrivals.
func DecodeTrace(data []byte, source string) ([]Job, error) {
	var f traceFile
	if err := decodeStrict(data, source, &f); err != nil {
		return nil, err
	}
	if len(f.Jobs) == 0 {
		return nil, fmt.Errorf("read trace %s: no jobs; want {jobs: [...]} with at least one job", source)
	}
	if len(f.Jobs) > MaxJobs {
		return nil, fmt.Errorf("read trace %s: %d jobs, more than the %d a trace may hold", source, len(f.Jobs), MaxJobs)
	}
	jobs := make([]Job, 0, len(f.Jobs))
	for i := range f.Jobs {
		j, err := f.Jobs[i].job(i)
		if err != nil {
			return nil, fmt.Errorf("read trace %s: %w", source, err)
		}
		jobs = append(jobs, j)
	}
	if err := finish(jobs); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", source, err)
	}
	return jobs, nil
}

// decodeStrict reads a YAML or JSON trace ({"jobs": [...]}) into f: unknown, duplicate or
// mistyped fields are errors.
func decodeStrict(data []byte, source string, f any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("read trace %s: not valid YAML or JSON: %w", source, err)
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return fmt.Errorf("read trace %s: empty; want {jobs: [...]}", source)
	}
	strict, err := sigsjson.UnmarshalStrict(js, f)
	if err != nil {
		return fmt.Errorf("read trace %s: %w", source, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("read trace %s: %w", source, errors.Join(strict...))
	}
	return nil
}

// traceJobName is the name of a trace's i-th job (from 0; job-N when the entry names none) and
// how its errors name it; both trace formats use it.
func traceJobName(name string, i int) (string, string) {
	if name == "" {
		name = "job-" + strconv.Itoa(i+1)
	}
	return name, fmt.Sprintf("job %s (jobs[%d])", name, i)
}

// job validates one entry; i is its position (from 0).
func (t *traceJob) job(i int) (Job, error) {
	name, where := traceJobName(t.Name, i)
	if t.Arrival == nil {
		return Job{}, fmt.Errorf("%s: arrival is required (seconds from the start, or a duration)", where)
	}
	if t.Runtime == nil {
		return Job{}, fmt.Errorf("%s: runtime is required (the base runtime in seconds, or a duration)", where)
	}
	if *t.Runtime <= 0 {
		return Job{}, fmt.Errorf("%s: runtime must be positive", where)
	}
	j := Job{Name: name, Arrival: time.Duration(*t.Arrival), Runtime: time.Duration(*t.Runtime), Spec: v1alpha1.HPCJobSpec{
		Tasks: t.Tasks, Profile: t.Profile, Granularity: t.Granularity, Workers: t.Workers,
		TaskResources: t.TaskResources, Priority: ptr.To(t.Priority), Placement: t.Placement, ExclusiveNodes: t.ExclusiveNodes,
	}}
	if t.Gang != nil {
		j.Spec.Gang.TimeoutSeconds = t.Gang.TimeoutSeconds
	}
	v1alpha1.SetDefaults(&j.Spec)
	if errs := v1alpha1.Validate(j.HPCJob()); len(errs) > 0 {
		return Job{}, fmt.Errorf("%s: %w", where, errs.ToAggregate())
	}
	return j, nil
}

// finish checks that names are unique and orders jobs by arrival.
func finish(jobs []Job) error {
	seen := make(map[string]int, len(jobs))
	for i := range jobs {
		if prev, dup := seen[jobs[i].Name]; dup {
			return fmt.Errorf("job %s (jobs[%d]): name already used by jobs[%d]; give every job its own name", jobs[i].Name, i, prev)
		}
		seen[jobs[i].Name] = i
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return nil
}

// EncodeTrace writes jobs in the YAML trace format DecodeTrace reads.
func EncodeTrace(jobs []Job) ([]byte, error) {
	f := traceFile{Jobs: make([]traceJob, len(jobs))}
	for i := range jobs {
		j := &jobs[i]
		arrival, runtime := Duration(j.Arrival), Duration(j.Runtime)
		f.Jobs[i] = traceJob{
			Name: j.Name, Arrival: &arrival, Runtime: &runtime, Tasks: j.Spec.Tasks, Profile: j.Spec.Profile,
			Granularity: j.Spec.Granularity, Workers: j.Spec.Workers, TaskResources: j.Spec.TaskResources,
			Priority: ptr.Deref(j.Spec.Priority, 0), Placement: j.Spec.Placement, ExclusiveNodes: j.Spec.ExclusiveNodes,
		}
		if j.Spec.Gang.TimeoutSeconds != v1alpha1.DefaultTimeoutSeconds {
			f.Jobs[i].Gang = &traceGang{TimeoutSeconds: j.Spec.Gang.TimeoutSeconds}
		}
	}
	return yaml.Marshal(f)
}
