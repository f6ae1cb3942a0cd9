package hpcjob

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
)

// Hostfile location in the launcher.
const (
	HostfileKey        = "hostfile"
	hostfileDir        = "/etc/mpi"
	HostfilePath       = hostfileDir + "/" + HostfileKey
	hostfileVolume     = "finegrain-hostfile"
	envHostfile        = "FINEGRAIN_HOSTFILE"
	envOpenMPIHostfile = "OMPI_MCA_orte_default_hostfile"
)

// Worker is one worker of an expanded job.
type Worker struct {
	// Index is the worker's number; its pod is named v1alpha1.WorkerName(job, Index).
	Index int
	Name  string
	// Hostname is the worker's DNS name as the launcher sees it (through the headless Service).
	Hostname string
	Tasks    int
	Group    int
}

// Workers is MPI-aware expansion plus task grouping (paper Algorithms 2 and 3): Nt tasks dealt
// round-robin over Nw workers, the workers put into Ng groups by least requested CPU, then
// numbered group by group so that consecutive MPI ranks (hostfile order) share a group, and so
// a node.
func Workers(job *v1alpha1.HPCJob, tasks []int, groups int) []Worker {
	cpu := job.Spec.TaskResources.CPU.MilliValue()
	req := make([]int64, len(tasks))
	for i, t := range tasks {
		req[i] = int64(t) * cpu
	}
	grp := plan.AssignGroups(req, groups)
	slots := make([]int, len(tasks))
	for i := range slots {
		slots[i] = i
	}
	slices.SortStableFunc(slots, func(a, b int) int { return cmp.Compare(grp[a], grp[b]) })
	out := make([]Worker, len(tasks))
	for i, s := range slots {
		out[i] = NewWorker(job, i, tasks[s], grp[s])
	}
	return out
}

// NewWorker describes worker index of job.
func NewWorker(job *v1alpha1.HPCJob, index, tasks, group int) Worker {
	name := v1alpha1.WorkerName(job.Name, index)
	return Worker{
		Index:    index,
		Name:     name,
		Hostname: name + "." + v1alpha1.ServiceName(job.Name) + "." + job.Namespace + ".svc",
		Tasks:    tasks,
		Group:    group,
	}
}

// Hostfile is the MPI hostfile: one line "<hostname> slots=<tasks>" per worker, in rank order.
func Hostfile(workers []Worker) string {
	var b strings.Builder
	for _, w := range workers {
		fmt.Fprintf(&b, "%s slots=%d\n", w.Hostname, w.Tasks)
	}
	return b.String()
}

func labels(job *v1alpha1.HPCJob, tmpl map[string]string, role string) map[string]string {
	l := make(map[string]string, len(tmpl)+3)
	for k, v := range tmpl {
		l[k] = v
	}
	l[v1alpha1.LabelJob] = job.Name
	l[v1alpha1.LabelRole] = role
	return l
}

func ownerRefs(job *v1alpha1.HPCJob) []metav1.OwnerReference {
	if job.UID == "" {
		return nil
	}
	return []metav1.OwnerReference{*metav1.NewControllerRef(job, v1alpha1.GroupVersion.WithKind(v1alpha1.Kind))}
}

// WorkerPod is worker w's pod: the worker template with the job's labels, the exclusive
// pinning label, hostname and subdomain for the hostfile, the placer as scheduler, and the
// first container asking for (and limited to) the task resources times w.Tasks.
func WorkerPod(job *v1alpha1.HPCJob, w Worker, schedulerName string) *corev1.Pod {
	t := job.Spec.Worker.DeepCopy()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            w.Name,
			Namespace:       job.Namespace,
			Labels:          labels(job, t.Labels, v1alpha1.RoleWorker),
			Annotations:     t.Annotations,
			OwnerReferences: ownerRefs(job),
		},
		Spec: t.Spec,
	}
	pod.Labels[v1alpha1.LabelPinning] = v1alpha1.PinningExclusive
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	// Only the placer says which NUMA node a worker gets, when it binds it.
	delete(pod.Annotations, v1alpha1.AnnotationNUMANode)
	pod.Annotations[v1alpha1.AnnotationGroup] = strconv.Itoa(w.Group)
	pod.Annotations[v1alpha1.AnnotationTasks] = strconv.Itoa(w.Tasks)
	if job.Spec.ExclusiveNodes {
		pod.Annotations[v1alpha1.AnnotationExclusiveNodes] = "true"
	}
	pod.Spec.SchedulerName = schedulerName
	pod.Spec.Hostname = w.Name
	pod.Spec.Subdomain = v1alpha1.ServiceName(job.Name)
	res := corev1.ResourceList{}
	cpu := job.Spec.TaskResources.CPU.MilliValue() * int64(w.Tasks)
	res[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
	if mem := job.Spec.TaskResources.Memory.Value(); mem > 0 {
		res[corev1.ResourceMemory] = *resource.NewQuantity(mem*int64(w.Tasks), resource.BinarySI)
	}
	c := &pod.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	for k, v := range res {
		c.Resources.Requests[k] = v
		c.Resources.Limits[k] = v
	}
	return pod
}

// LauncherPod is the pod that runs mpirun, in the shared pool: the launcher template with the
// job's labels, the placer as scheduler, restartPolicy Never unless the template says otherwise,
// and the hostfile mounted at HostfilePath (also named by $FINEGRAIN_HOSTFILE and Open MPI's
// $OMPI_MCA_orte_default_hostfile).
func LauncherPod(job *v1alpha1.HPCJob, schedulerName string) *corev1.Pod {
	t := job.Spec.Launcher.DeepCopy()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            v1alpha1.LauncherName(job.Name),
			Namespace:       job.Namespace,
			Labels:          labels(job, t.Labels, v1alpha1.RoleLauncher),
			Annotations:     t.Annotations,
			OwnerReferences: ownerRefs(job),
		},
		Spec: t.Spec,
	}
	delete(pod.Labels, v1alpha1.LabelPinning)
	delete(pod.Annotations, v1alpha1.AnnotationNUMANode)
	pod.Spec.SchedulerName = schedulerName
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: hostfileVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: v1alpha1.HostfileName(job.Name)},
		}},
	})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: hostfileVolume, MountPath: hostfileDir, ReadOnly: true})
		c.Env = append(c.Env,
			corev1.EnvVar{Name: envHostfile, Value: HostfilePath},
			corev1.EnvVar{Name: envOpenMPIHostfile, Value: HostfilePath})
	}
	return pod
}

// Service is the headless Service giving every worker the DNS name in its Worker.Hostname, also
// before the worker is ready (mpirun connects while workers start).
func Service(job *v1alpha1.HPCJob) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: v1alpha1.ServiceName(job.Name), Namespace: job.Namespace,
			Labels: map[string]string{v1alpha1.LabelJob: job.Name}, OwnerReferences: ownerRefs(job),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{v1alpha1.LabelJob: job.Name, v1alpha1.LabelRole: v1alpha1.RoleWorker},
			PublishNotReadyAddresses: true,
		},
	}
}

// HostfileConfigMap holds the hostfile under HostfileKey.
func HostfileConfigMap(job *v1alpha1.HPCJob, workers []Worker) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: v1alpha1.HostfileName(job.Name), Namespace: job.Namespace,
			Labels: map[string]string{v1alpha1.LabelJob: job.Name}, OwnerReferences: ownerRefs(job),
		},
		Data: map[string]string{HostfileKey: Hostfile(workers)},
	}
}
