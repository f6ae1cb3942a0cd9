package sim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"sigs.k8s.io/yaml"
)

// ElasticJob is one job of the elastic experiment.
type ElasticJob struct {
	Name string
	// Arrival is the submit time, from the start of the simulation.
	Arrival time.Duration
	// Type names the job's type in the model: its speed-up curve, and its bounds and timesteps
	// unless the job gives its own.
	Type     string
	Priority int32
	// Min and Max bound the job's replicas.
	Min, Max  int
	Timesteps int
}

// Elastic priorities are 1 (lowest) to 5, as in the paper.
const (
	ElasticMinPriority = 1
	ElasticMaxPriority = 5
)

// GenerateElastic draws the experiment's random job set: n jobs, the type uniform over the
// model's types, the priority uniform over 1–5 (by type with the model's PriorityByType), the
// type's own bounds and timesteps, job i submitted at i × gap. The same seed always gives the same jobs.
func GenerateElastic(m *ElasticModel, n int, seed uint64, gap time.Duration) ([]ElasticJob, error) {
	switch {
	case n < 1 || n > MaxJobs:
		return nil, fmt.Errorf("generate: %d jobs, want 1 to %d", n, MaxJobs)
	case gap < 0 || time.Duration(n-1)*gap > MaxDuration || gap > MaxDuration:
		return nil, fmt.Errorf("generate: submission gap %v for %d jobs; want the last job submitted within %v", gap, n, MaxDuration)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^genSeedStreamConst))
	jobs := make([]ElasticJob, n)
	for i := range jobs {
		k := rng.IntN(len(m.Types))
		t := &m.Types[k]
		prio := ElasticMinPriority + rng.IntN(ElasticMaxPriority-ElasticMinPriority+1)
		if m.PriorityByType {
			prio = len(m.Types) - k + rng.IntN(2)
		}
		jobs[i] = ElasticJob{
			Name: fmt.Sprintf("%s-%d", t.Name, i+1), Arrival: time.Duration(i) * gap, Type: t.Name,
			Priority: int32(prio), Min: t.Min, Max: t.Max, Timesteps: t.Timesteps,
		}
	}
	return jobs, nil
}

// elasticTraceJob is one elastic job as a trace file writes it.
type elasticTraceJob struct {
	Name      string             `json:"name,omitempty"`
	Arrival   *Duration          `json:"arrival"`
	Type      string             `json:"type"`
	Priority  int32              `json:"priority"`
	Elastic   *elasticTraceRange `json:"elastic,omitempty"`
	Timesteps int                `json:"timesteps,omitempty"`
}

// elasticTraceRange is the part of an HPCJob's elastic block the experiment reads.
type elasticTraceRange struct {
	MinReplicas int `json:"minReplicas"`
	MaxReplicas int `json:"maxReplicas"`
}

type elasticTraceFile struct {
	Jobs []elasticTraceJob `json:"jobs"`
}

// DecodeElasticTrace reads a YAML or JSON trace of elastic jobs ({"jobs": [...]}, each with
// name, arrival, type, priority 1–5, and optionally elastic {minReplicas, maxReplicas} and
// timesteps, which default to the type's) strictly: unknown, duplicate or mistyped fields are
// errors naming the job and the field. Jobs come back ordered by arrival, file order among
// equal arrivals.
func DecodeElasticTrace(data []byte, source string, m *ElasticModel) ([]ElasticJob, error) {
	var f elasticTraceFile
	if err := decodeStrict(data, source, &f); err != nil {
		return nil, err
	}
	if len(f.Jobs) == 0 || len(f.Jobs) > MaxJobs {
		return nil, fmt.Errorf("read trace %s: %d jobs; want {jobs: [...]} with 1 to %d jobs", source, len(f.Jobs), MaxJobs)
	}
	jobs := make([]ElasticJob, len(f.Jobs))
	seen := make(map[string]int, len(f.Jobs))
	for i := range f.Jobs {
		var err error
		if jobs[i], err = f.Jobs[i].job(i, m); err != nil {
			return nil, fmt.Errorf("read trace %s: %w", source, err)
		}
		if prev, dup := seen[jobs[i].Name]; dup {
			return nil, fmt.Errorf("read trace %s: job %s (jobs[%d]): name already used by jobs[%d]; give every job its own name", source, jobs[i].Name, i, prev)
		}
		seen[jobs[i].Name] = i
	}
	slices.SortStableFunc(jobs, func(a, b ElasticJob) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return jobs, nil
}

func (t *elasticTraceJob) job(i int, m *ElasticModel) (ElasticJob, error) {
	name, where := traceJobName(t.Name, i)
	if t.Arrival == nil {
		return ElasticJob{}, fmt.Errorf("%s: arrival is required (seconds from the start, or a duration)", where)
	}
	typ, err := m.Type(t.Type)
	if err != nil {
		return ElasticJob{}, fmt.Errorf("%s: %w", where, err)
	}
	if t.Priority < ElasticMinPriority || t.Priority > ElasticMaxPriority {
		return ElasticJob{}, fmt.Errorf("%s: priority %d; want %d to %d", where, t.Priority, ElasticMinPriority, ElasticMaxPriority)
	}
	j := ElasticJob{Name: name, Arrival: time.Duration(*t.Arrival), Type: typ.Name, Priority: t.Priority,
		Min: typ.Min, Max: typ.Max, Timesteps: typ.Timesteps}
	if t.Elastic != nil {
		j.Min, j.Max = t.Elastic.MinReplicas, t.Elastic.MaxReplicas
		if j.Min < 1 || j.Max < j.Min || j.Max > maxElasticReplicas {
			return ElasticJob{}, fmt.Errorf("%s: elastic: minReplicas %d, maxReplicas %d; want 1 ≤ minReplicas ≤ maxReplicas ≤ %d", where, j.Min, j.Max, maxElasticReplicas)
		}
	}
	if t.Timesteps != 0 {
		if t.Timesteps < 0 || t.Timesteps > maxTimesteps {
			return ElasticJob{}, fmt.Errorf("%s: timesteps %d; want 1 to %d (or leave it out for the type's)", where, t.Timesteps, maxTimesteps)
		}
		j.Timesteps = t.Timesteps
	}
	return j, nil
}

// Bounds that keep an elastic trace's simulation finite.
const (
	maxElasticReplicas = 1_000_000
	maxTimesteps       = 1_000_000_000
)

// EncodeElasticTrace writes jobs in the format DecodeElasticTrace reads.
func EncodeElasticTrace(jobs []ElasticJob) ([]byte, error) {
	f := elasticTraceFile{Jobs: make([]elasticTraceJob, len(jobs))}
	for i, j := range jobs {
		arrival := Duration(j.Arrival)
		f.Jobs[i] = elasticTraceJob{Name: j.Name, Arrival: &arrival, Type: j.Type, Priority: j.Priority,
			Elastic: &elasticTraceRange{MinReplicas: j.Min, MaxReplicas: j.Max}, Timesteps: j.Timesteps}
	}
	return yaml.Marshal(f)
}
