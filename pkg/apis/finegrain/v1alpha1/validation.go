package v1alpha1

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxWorkersOf is the largest number of workers the spec can expand to under any cluster: the
// bound on worker pod names and on the job's object count.
func MaxWorkersOf(spec *HPCJobSpec) int {
	switch {
	case spec.Elastic != nil:
		return int(spec.Elastic.MaxReplicas)
	case spec.SlotsPerWorker > 0:
		return SlotWorkers(spec)
	case spec.Granularity == GranularityNone:
		return int(spec.Workers)
	default:
		// scale and granularity use at most one worker per task; a network job that does not
		// fit one NUMA node splits into at most one worker per task.
		return int(min(spec.Tasks, MaxWorkers))
	}
}

// Validate reports everything wrong with a defaulted job, each error naming its field and what
// is allowed. An empty list means the placer can expand the job.
func Validate(job *HPCJob) field.ErrorList {
	var errs field.ErrorList
	spec := &job.Spec
	sp := field.NewPath("spec")
	errs = append(errs, validateCounts(spec, sp)...)
	errs = append(errs, validateEnums(spec, sp)...)
	errs = append(errs, validateResources(spec, sp.Child("taskResources"))...)
	errs = append(errs, validateGang(spec, sp)...)
	errs = append(errs, validateMPI(spec, sp)...)
	if name := spec.PriorityClassName; name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(sp.Child("priorityClassName"), name, msg))
		}
	}
	errs = append(errs, validateTemplate(&spec.Worker, sp.Child("worker"))...)
	errs = append(errs, validateTemplate(&spec.Launcher, sp.Child("launcher"))...)
	if len(errs) == 0 {
		errs = append(errs, validateName(job)...)
	}
	return errs
}

func validateCounts(spec *HPCJobSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Tasks < 1 || spec.Tasks > MaxTasks {
		errs = append(errs, field.Invalid(sp.Child("tasks"), spec.Tasks,
			fmt.Sprintf("must be between 1 and %d MPI tasks", MaxTasks)))
		return errs
	}
	if spec.Workers < 0 || spec.Workers > spec.Tasks || spec.Workers > MaxWorkers {
		errs = append(errs, field.Invalid(sp.Child("workers"), spec.Workers,
			fmt.Sprintf("must be between 1 and min(tasks, %d); a worker runs at least one task", MaxWorkers)))
	}
	if spec.RunLauncherAsWorker && spec.SlotsPerWorker == 0 {
		errs = append(errs, field.Required(sp.Child("slotsPerWorker"), "runLauncherAsWorker gives the launcher slotsPerWorker of the tasks; set slotsPerWorker"))
	}
	if spec.SlotsPerWorker != 0 {
		errs = append(errs, validateSlots(spec, sp)...)
	} else if spec.Granularity == GranularityNone && spec.Workers == 0 && spec.Elastic == nil {
		errs = append(errs, field.Required(sp.Child("workers"), "granularity none runs exactly this many workers"))
	}
	if spec.Granularity == GranularityFine && spec.Profile != ProfileNetwork && spec.Tasks > MaxWorkers {
		errs = append(errs, field.Invalid(sp.Child("tasks"), spec.Tasks,
			fmt.Sprintf("granularity runs one worker per task and a job may have at most %d workers; use scale", MaxWorkers)))
	}
	if e := spec.Elastic; e != nil {
		ep := sp.Child("elastic")
		switch {
		case e.MinReplicas < 1:
			errs = append(errs, field.Invalid(ep.Child("minReplicas"), e.MinReplicas, "must be at least 1"))
		case e.MaxReplicas < e.MinReplicas:
			errs = append(errs, field.Invalid(ep.Child("maxReplicas"), e.MaxReplicas, "must be at least minReplicas"))
		case e.MaxReplicas > spec.Tasks || e.MaxReplicas > MaxWorkers:
			errs = append(errs, field.Invalid(ep.Child("maxReplicas"), e.MaxReplicas,
				fmt.Sprintf("must be at most min(tasks, %d); every worker runs tasks/maxReplicas tasks", MaxWorkers)))
		case spec.Tasks%e.MaxReplicas != 0:
			errs = append(errs, field.Invalid(ep.Child("maxReplicas"), e.MaxReplicas,
				fmt.Sprintf("must divide tasks (%d): every worker of an elastic job runs the same number of tasks", spec.Tasks)))
		}
		if e.RescaleGapSeconds < 0 {
			errs = append(errs, field.Invalid(ep.Child("rescaleGapSeconds"), e.RescaleGapSeconds, "must not be negative"))
		}
		if spec.Gang.MinAvailable != nil {
			errs = append(errs, field.Forbidden(sp.Child("gang", "minAvailable"),
				"an elastic job starts with as many workers as fit, at least elastic.minReplicas; set that instead"))
		}
		if spec.Granularity != GranularityScale {
			errs = append(errs, field.Invalid(sp.Child("granularity"), spec.Granularity,
				"an elastic job chooses its own worker count; leave granularity unset or scale"))
		}
		errs = append(errs, validateHook(e.RescaleHook, ep.Child("rescaleHook"))...)
	}
	return errs
}

// SlotWorkers is the worker count a spec with slotsPerWorker fixes: tasks/slotsPerWorker, less
// the launcher when it runs as a worker.
func SlotWorkers(spec *HPCJobSpec) int {
	n := int(spec.Tasks / spec.SlotsPerWorker)
	if spec.RunLauncherAsWorker {
		n--
	}
	return n
}

// validateSlots checks slotsPerWorker against the counts it fixes: it divides tasks into at most
// MaxWorkers workers, agrees with workers when both are set, and leaves no room for a policy that
// sizes workers itself (granularity's one task per worker, elastic's tasks/maxReplicas).
func validateSlots(spec *HPCJobSpec, sp *field.Path) field.ErrorList {
	slots := spec.SlotsPerWorker
	fp := sp.Child("slotsPerWorker")
	switch {
	case slots < 1 || slots > spec.Tasks:
		return field.ErrorList{field.Invalid(fp, slots, fmt.Sprintf("must be between 1 and tasks (%d)", spec.Tasks))}
	case spec.Tasks%slots != 0:
		return field.ErrorList{field.Invalid(fp, slots, fmt.Sprintf("must divide tasks (%d): every worker runs slotsPerWorker tasks", spec.Tasks))}
	case spec.Tasks/slots > MaxWorkers:
		return field.ErrorList{field.Invalid(fp, slots, fmt.Sprintf("tasks/slotsPerWorker is %d workers, more than %d; use more slots per worker", spec.Tasks/slots, MaxWorkers))}
	case spec.Elastic != nil:
		return field.ErrorList{field.Forbidden(fp, "an elastic job's workers run tasks/elastic.maxReplicas tasks each; leave slotsPerWorker unset")}
	case spec.Granularity == GranularityFine && slots != 1:
		return field.ErrorList{field.Invalid(sp.Child("granularity"), spec.Granularity,
			"granularity runs one task per worker, slotsPerWorker more; use scale (or none) with slotsPerWorker")}
	case spec.RunLauncherAsWorker && spec.Tasks/slots < 2:
		return field.ErrorList{field.Invalid(fp, slots,
			fmt.Sprintf("with runLauncherAsWorker the launcher runs slotsPerWorker of the %d tasks and at least one worker the rest; use at most %d", spec.Tasks, spec.Tasks/2))}
	case spec.Workers != 0 && int(spec.Workers) != SlotWorkers(spec):
		return field.ErrorList{field.Invalid(sp.Child("workers"), spec.Workers,
			fmt.Sprintf("with slotsPerWorker %d the job has %d workers (tasks/slotsPerWorker, less the launcher when it runs as a worker); leave workers unset or set that", slots, SlotWorkers(spec)))}
	}
	return nil
}

// MaxRescaleTimeoutSeconds bounds rescaleHook.timeoutSeconds.
const MaxRescaleTimeoutSeconds = 3600

func validateHook(h *RescaleHook, hp *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case (h.HTTP == nil) == (h.Exec == nil):
		errs = append(errs, field.Invalid(hp, "", "set exactly one of http (an endpoint the launcher serves) and exec (a command run in the launcher)"))
	case h.HTTP != nil:
		if h.HTTP.Port < 1 || h.HTTP.Port > 65535 {
			errs = append(errs, field.Invalid(hp.Child("http", "port"), h.HTTP.Port, "must be a port number, 1 to 65535"))
		}
		if !strings.HasPrefix(h.HTTP.Path, "/") {
			errs = append(errs, field.Invalid(hp.Child("http", "path"), h.HTTP.Path, "must be an absolute URL path such as /rescale"))
		}
	case len(h.Exec.Command) == 0 || h.Exec.Command[0] == "":
		errs = append(errs, field.Required(hp.Child("exec", "command"), "name the program to run in the launcher, e.g. [/bin/sh, -c, ...]"))
	}
	if h.TimeoutSeconds < 1 || h.TimeoutSeconds > MaxRescaleTimeoutSeconds {
		errs = append(errs, field.Invalid(hp.Child("timeoutSeconds"), h.TimeoutSeconds,
			fmt.Sprintf("must be between 1 and %d seconds", MaxRescaleTimeoutSeconds)))
	}
	return errs
}

func validateEnums(spec *HPCJobSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.Profile {
	case ProfileCPU, ProfileMemory, ProfileNetwork:
	default:
		errs = append(errs, field.NotSupported(sp.Child("profile"), spec.Profile,
			[]Profile{ProfileCPU, ProfileMemory, ProfileNetwork}))
	}
	switch spec.Granularity {
	case GranularityScale, GranularityFine, GranularityNone:
	default:
		errs = append(errs, field.NotSupported(sp.Child("granularity"), spec.Granularity,
			[]Granularity{GranularityScale, GranularityFine, GranularityNone}))
	}
	switch spec.Placement {
	case LeastLoaded, MostLoaded:
	default:
		errs = append(errs, field.NotSupported(sp.Child("placement"), spec.Placement,
			[]PlacementPolicy{LeastLoaded, MostLoaded}))
	}
	return errs
}

func validateResources(spec *HPCJobSpec, rp *field.Path) field.ErrorList {
	var errs field.ErrorList
	cpu := spec.TaskResources.CPU
	switch {
	case cpu.IsZero():
		errs = append(errs, field.Required(rp.Child("cpu"), "give the whole CPUs one task needs, e.g. \"1\""))
	case cpu.Sign() < 0 || cpu.MilliValue()%1000 != 0:
		errs = append(errs, field.Invalid(rp.Child("cpu"), cpu.String(),
			"must be a positive whole number of CPUs: workers get exclusive cores"))
	case cpu.Value() > MaxCPUPerTask:
		errs = append(errs, field.Invalid(rp.Child("cpu"), cpu.String(),
			fmt.Sprintf("must be at most %d CPUs per task", MaxCPUPerTask)))
	}
	mem := spec.TaskResources.Memory
	switch {
	case mem.Sign() < 0:
		errs = append(errs, field.Invalid(rp.Child("memory"), mem.String(), "must not be negative"))
	case spec.Tasks > 0 && mem.Value() > math.MaxInt64/int64(spec.Tasks)/2:
		errs = append(errs, field.Invalid(rp.Child("memory"), mem.String(), "times tasks overflows; ask for less memory per task"))
	}
	return errs
}

func validateGang(spec *HPCJobSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	gp := sp.Child("gang")
	if m := spec.Gang.MinAvailable; m != nil && (*m < 1 || *m > MaxWorkers) {
		errs = append(errs, field.Invalid(gp.Child("minAvailable"), *m,
			fmt.Sprintf("must be between 1 and %d workers (it is capped at the job's worker count)", MaxWorkers)))
	}
	if spec.Gang.TimeoutSeconds < 0 {
		errs = append(errs, field.Invalid(gp.Child("timeoutSeconds"), spec.Gang.TimeoutSeconds, "must not be negative"))
	}
	return errs
}

func validateMPI(spec *HPCJobSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.MPIImplementation {
	case OpenMPI, MPICH:
	default:
		errs = append(errs, field.NotSupported(sp.Child("mpiImplementation"), spec.MPIImplementation,
			[]MPIImplementation{OpenMPI, MPICH}))
	}
	switch spec.LauncherCreationPolicy {
	case WaitForWorkersReady, AtStartup:
	default:
		errs = append(errs, field.NotSupported(sp.Child("launcherCreationPolicy"), spec.LauncherCreationPolicy,
			[]LauncherCreationPolicy{WaitForWorkersReady, AtStartup}))
	}
	if p := spec.SSHAuthMountPath; !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		errs = append(errs, field.Invalid(sp.Child("sshAuthMountPath"), p,
			"must be a clean absolute directory path other than /, such as /root/.ssh or /home/mpiuser/.ssh"))
	}
	rp := sp.Child("runPolicy")
	r := &spec.RunPolicy
	switch r.CleanPodPolicy {
	case CleanPodPolicyRunning, CleanPodPolicyAll, CleanPodPolicyNone:
	default:
		errs = append(errs, field.NotSupported(rp.Child("cleanPodPolicy"), r.CleanPodPolicy,
			[]CleanPodPolicy{CleanPodPolicyRunning, CleanPodPolicyAll, CleanPodPolicyNone}))
	}
	if t := r.TTLSecondsAfterFinished; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(rp.Child("ttlSecondsAfterFinished"), *t, "must not be negative"))
	}
	if d := r.ActiveDeadlineSeconds; d != nil && *d < 1 {
		errs = append(errs, field.Invalid(rp.Child("activeDeadlineSeconds"), *d, "must be at least 1 second"))
	}
	if b := r.BackoffLimit; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(rp.Child("backoffLimit"), *b, "must not be negative"))
	}
	return errs
}

func validateTemplate(t *corev1.PodTemplateSpec, tp *field.Path) field.ErrorList {
	var errs field.ErrorList
	ps := tp.Child("spec")
	if len(t.Spec.Containers) == 0 {
		errs = append(errs, field.Required(ps.Child("containers"), "the pod needs at least one container"))
	}
	if t.Spec.NodeName != "" {
		errs = append(errs, field.Forbidden(ps.Child("nodeName"), "the placer chooses nodes; leave nodeName empty"))
	}
	if t.Spec.SchedulerName != "" {
		errs = append(errs, field.Forbidden(ps.Child("schedulerName"), "the placer sets schedulerName; leave it empty"))
	}
	if t.Spec.PriorityClassName != "" || t.Spec.Priority != nil {
		errs = append(errs, field.Forbidden(ps.Child("priorityClassName"),
			"the job's pods take the job's priority; set spec.priorityClassName of the HPCJob instead"))
	}
	if t.Spec.Hostname != "" || t.Spec.Subdomain != "" {
		errs = append(errs, field.Forbidden(ps.Child("hostname"),
			"the placer sets hostname and subdomain so that the hostfile resolves; leave them empty"))
	}
	return errs
}

// validateName checks that every object the job expands to gets a valid name: the worker
// hostnames and the Service name are DNS labels of at most 63 characters.
func validateName(job *HPCJob) field.ErrorList {
	np := field.NewPath("metadata", "name")
	name := job.Name
	if name == "" {
		return field.ErrorList{field.Required(np, "the job needs a name")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(name) {
		errs = append(errs, field.Invalid(np, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	longest := WorkerName(name, max(MaxWorkersOf(&job.Spec)-1, 0))
	if len(longest) > validation.DNS1035LabelMaxLength {
		errs = append(errs, field.TooLong(np, name, validation.DNS1035LabelMaxLength-len(longest)+len(name)))
	}
	return errs
}

// WorkerName is the pod name and hostname of worker i of job.
func WorkerName(job string, i int) string { return job + "-worker-" + strconv.Itoa(i) }

// LauncherName is the launcher pod's name.
func LauncherName(job string) string { return job + "-launcher" }

// ServiceName is the headless Service giving the workers stable DNS names.
func ServiceName(job string) string { return job + "-workers" }

// HostfileName is the ConfigMap holding the hostfile and the SSH client configuration.
func HostfileName(job string) string { return job + "-hostfile" }

// SSHSecretName is the Secret holding the job's SSH key pair.
func SSHSecretName(job string) string { return job + "-ssh" }
