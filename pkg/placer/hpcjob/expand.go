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
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
)

// Where the launcher finds the job's ConfigMap: the hostfile and the SSH client configuration.
const (
	hostfileDir    = "/etc/mpi"
	HostfilePath   = hostfileDir + "/" + mpi.HostfileKey
	hostfileVolume = "finegrain-hostfile"
	sshVolume      = "finegrain-ssh"
	// sshPortName names the worker's sshd port among its first container's ports.
	sshPortName = "ssh"
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
	// Port is the worker's sshd port: mpi.DefaultSSHPort on a pod network; on the node's
	// network 0 until AssignSSHPorts gives it one free on its node.
	Port int32
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
	port := int32(mpi.DefaultSSHPort)
	if OnHostNetwork(job) {
		port = 0
	}
	return Worker{
		Index:    index,
		Name:     name,
		Hostname: name + "." + v1alpha1.ServiceName(job.Name) + "." + job.Namespace + ".svc",
		Tasks:    tasks,
		Group:    group,
		Port:     port,
	}
}

// ElasticWorker describes worker index of an elastic job, the one shape every worker of one
// has: Tasks/MaxReplicas tasks, in a task group of its own (spread) unless the job is network
// bound (one group, packed). PlanJob starts a job with workers 0 to k-1 of this shape (what
// Workers makes of k equal workers in k groups, or in one), and the controller expands a running
// job with the next indices.
func ElasticWorker(job *v1alpha1.HPCJob, index int) Worker {
	group := index
	if job.Spec.Profile == v1alpha1.ProfileNetwork {
		group = 0
	}
	return NewWorker(job, index, int(job.Spec.Tasks/job.Spec.Elastic.MaxReplicas), group)
}

// WorkerOf describes an existing worker pod of job from what the placer wrote on it.
func WorkerOf(job *v1alpha1.HPCJob, pod *corev1.Pod) Worker {
	index, _ := strconv.Atoi(strings.TrimPrefix(pod.Name, job.Name+"-worker-"))
	tasks, _ := strconv.Atoi(pod.Annotations[v1alpha1.AnnotationTasks])
	group, _ := strconv.Atoi(pod.Annotations[v1alpha1.AnnotationGroup])
	w := NewWorker(job, index, tasks, group)
	if len(pod.Spec.Containers) > 0 {
		for _, p := range pod.Spec.Containers[0].Ports {
			if p.Name == sshPortName {
				w.Port = p.ContainerPort
			}
		}
	}
	return w
}

// OnHostNetwork reports whether the job's workers use their node's network, where workers on one
// node need sshd ports of their own.
func OnHostNetwork(job *v1alpha1.HPCJob) bool { return job.Spec.Worker.Spec.HostNetwork }

// AssignSSHPorts gives each worker on its node's network the lowest port of r free on its node
// (nodes[i] is worker i's node, "" for one not placed yet): neither held by a pod of the node in
// s nor given to another worker there. Workers on a pod network keep mpi.DefaultSSHPort.
func AssignSSHPorts(job *v1alpha1.HPCJob, s *snapshot.Snapshot, r mpi.PortRange, workers []Worker, nodes []string) error {
	if !OnHostNetwork(job) {
		return nil
	}
	ports := mpi.NewPorts(r)
	order := make([]int, len(workers))
	for i := range order {
		order[i] = i
	}
	// Placed workers first: one not placed yet takes a port none of them has.
	unplaced := func(i int) int {
		if nodes[i] == "" {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(unplaced(a), unplaced(b)) })
	for _, i := range order {
		var inUse func(int32) bool
		if ni, ok := s.NodeIndex(nodes[i]); ok {
			node := &s.Nodes[ni]
			inUse = func(port int32) bool {
				return node.HostPortInUse(snapshot.HostPort{Protocol: corev1.ProtocolTCP, Port: port})
			}
		}
		port, err := ports.Take(nodes[i], inUse)
		if err != nil {
			return fmt.Errorf("worker %s: %w", workers[i].Name, err)
		}
		workers[i].Port = port
	}
	return nil
}

// Hosts are the workers as the launcher reaches them, in rank order.
func Hosts(workers []Worker) []mpi.Host {
	out := make([]mpi.Host, len(workers))
	for i, w := range workers {
		out[i] = mpi.Host{Name: w.Hostname, Slots: w.Tasks, Port: w.Port}
	}
	return out
}

// LauncherHost names the launcher in the hostfile of a job whose launcher runs as a worker: the
// local host to both MPI launchers, whatever the launcher's own name (its pod's, or its node's on
// the node's network).
const LauncherHost = "localhost"

// Hostfile is the job's MPI hostfile in its implementation's format, in rank order: the launcher
// first with slotsPerWorker slots when it runs as a worker, then the workers.
func Hostfile(job *v1alpha1.HPCJob, workers []Worker) string {
	hosts := Hosts(workers)
	if job.Spec.RunLauncherAsWorker {
		hosts = append([]mpi.Host{{Name: LauncherHost, Slots: int(job.Spec.SlotsPerWorker)}}, hosts...)
	}
	return mpi.Hostfile(job.Spec.MPIImplementation, hosts)
}

// WorkerTasks is how many of the job's tasks its workers run: all of them, less the launcher's
// slotsPerWorker when it runs as a worker.
func WorkerTasks(spec *v1alpha1.HPCJobSpec) int {
	if spec.RunLauncherAsWorker {
		return int(spec.Tasks - spec.SlotsPerWorker)
	}
	return int(spec.Tasks)
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
// pinning label, hostname and subdomain for the hostfile, the placer as scheduler, the job's
// PriorityClass (the API server's admission gives the pod its value), restartPolicy
// Never unless the template says otherwise (a worker that ends has lost its ranks), and the first
// container asking for (and limited to) the task resources times w.Tasks, with its sshd port
// (also on the node's network when the pod uses it), a readiness probe on that port unless the
// template has one, the job's SSH files at spec.sshAuthMountPath and the environment the MPI
// image's entrypoint reads.
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
	pod.Spec.PriorityClassName = job.Spec.PriorityClassName
	pod.Spec.Hostname = w.Name
	pod.Spec.Subdomain = v1alpha1.ServiceName(job.Name)
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	useClusterDNS(&pod.Spec)
	logsOnError(&pod.Spec)
	addSSHVolume(job, &pod.Spec)
	c := &pod.Spec.Containers[0]
	setTaskResources(job, w, c)
	c.VolumeMounts = append(c.VolumeMounts, sshMount(job))
	if w.Port == 0 {
		// Planned before its port is chosen: AssignSSHPorts rebuilds the pod with one.
		return pod
	}
	addSSHPort(job, w, c, pod.Spec.HostNetwork)
	return pod
}

// setTaskResources makes the worker's container ask for, and be limited to, the task resources
// times its tasks.
func setTaskResources(job *v1alpha1.HPCJob, w Worker, c *corev1.Container) {
	res := corev1.ResourceList{}
	cpu := job.Spec.TaskResources.CPU.MilliValue() * int64(w.Tasks)
	res[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
	if mem := job.Spec.TaskResources.Memory.Value(); mem > 0 {
		res[corev1.ResourceMemory] = *resource.NewQuantity(mem*int64(w.Tasks), resource.BinarySI)
	}
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
}

// sshStartupSeconds is how long a worker's sshd may take to accept connections after its
// container started: past it the kubelet kills the container, and the job's run ends naming the
// worker.
const sshStartupSeconds = 120

// addSSHPort gives the worker's container its sshd port (on the node's network too when the pod
// uses it), a startup probe on it unless the template has a startup or readiness probe, and the
// environment the MPI image's entrypoint reads. The container is Ready once sshd has accepted a
// connection; a startup probe is not repeated after that, so sshd's log shows only real logins
// (a readiness probe's connection every few seconds would fill it).
func addSSHPort(job *v1alpha1.HPCJob, w Worker, c *corev1.Container, hostNetwork bool) {
	port := corev1.ContainerPort{Name: sshPortName, ContainerPort: w.Port, Protocol: corev1.ProtocolTCP}
	if hostNetwork {
		port.HostPort = w.Port
	}
	c.Ports = append(c.Ports, port)
	if c.StartupProbe == nil && c.ReadinessProbe == nil {
		c.StartupProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(w.Port)}},
			PeriodSeconds:    1,
			TimeoutSeconds:   1,
			FailureThreshold: sshStartupSeconds,
		}
	}
	c.Env = addEnv(c.Env, mpi.WorkerEnv(job.Spec.MPIImplementation, job.Spec.SSHAuthMountPath, w.Port))
}

// LauncherPod is the pod that runs mpirun, in the shared pool (pinned, with the resources of
// slotsPerWorker tasks in its first container, when it runs as a worker): the launcher template
// with the job's labels, the placer as scheduler, the job's PriorityClass, restartPolicy Never
// unless the template says otherwise, the job's ConfigMap at /etc/mpi (the hostfile at HostfilePath), the job's SSH files at
// spec.sshAuthMountPath, and in every container the environment that makes a bare mpirun of the
// job's implementation use them (variables the template sets itself win).
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
	if job.Spec.RunLauncherAsWorker {
		// Its ranks get exclusive cores like a worker's; the placer chooses their NUMA node.
		pod.Labels[v1alpha1.LabelPinning] = v1alpha1.PinningExclusive
		setTaskResources(job, Worker{Tasks: int(job.Spec.SlotsPerWorker)}, &pod.Spec.Containers[0])
	}
	pod.Spec.SchedulerName = schedulerName
	pod.Spec.PriorityClassName = job.Spec.PriorityClassName
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	useClusterDNS(&pod.Spec)
	logsOnError(&pod.Spec)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: hostfileVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: v1alpha1.HostfileName(job.Name)},
		}},
	})
	addSSHVolume(job, &pod.Spec)
	env := mpi.LauncherEnv(job.Spec.MPIImplementation, HostfilePath, job.Spec.SSHAuthMountPath, !pod.Spec.HostNetwork)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: hostfileVolume, MountPath: hostfileDir, ReadOnly: true},
			sshMount(job))
		c.Env = addEnv(c.Env, env)
	}
	return pod
}

// useClusterDNS lets a pod on its node's network resolve the hostfile's names: with the default
// policy such a pod would use the node's resolver, which knows no Service.
func useClusterDNS(spec *corev1.PodSpec) {
	if spec.HostNetwork && (spec.DNSPolicy == "" || spec.DNSPolicy == corev1.DNSClusterFirst) {
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
}

// logsOnError makes the kubelet keep the end of a failed container's log as its termination
// message (unless the template chose otherwise), so that the job's condition can say why mpirun
// or sshd failed.
func logsOnError(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		if c := &spec.Containers[i]; c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		}
	}
}

// addSSHVolume adds the job's SSH directory: the Secret's key pair as id_ed25519 (readable by
// its owner only, as ssh demands), id_ed25519.pub and authorized_keys, and the ConfigMap's client
// configuration as config.
func addSSHVolume(job *v1alpha1.HPCJob, spec *corev1.PodSpec) {
	owner, all := int32(0o400), int32(0o444)
	secret := v1alpha1.SSHSecretName(job.Name)
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: sshVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: &all,
			Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: secret},
					Items: []corev1.KeyToPath{
						{Key: mpi.SecretPrivateKey, Path: mpi.IdentityFile, Mode: &owner},
						{Key: mpi.SecretPublicKey, Path: mpi.PublicKeyFile},
						{Key: mpi.SecretPublicKey, Path: mpi.AuthorizedKeysFile},
					},
				}},
				{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: v1alpha1.HostfileName(job.Name)},
					Items:                []corev1.KeyToPath{{Key: mpi.SSHConfigKey, Path: mpi.ClientConfigFile}},
				}},
			},
		}},
	})
}

func sshMount(job *v1alpha1.HPCJob) corev1.VolumeMount {
	return corev1.VolumeMount{Name: sshVolume, MountPath: job.Spec.SSHAuthMountPath, ReadOnly: true}
}

// addEnv appends the variables of add that env does not set already: what the template sets
// wins.
func addEnv(env, add []corev1.EnvVar) []corev1.EnvVar {
	for _, e := range add {
		if !slices.ContainsFunc(env, func(x corev1.EnvVar) bool { return x.Name == e.Name }) {
			env = append(env, e)
		}
	}
	return env
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

// HostfileConfigMap holds the hostfile under mpi.HostfileKey and the SSH client configuration
// under mpi.SSHConfigKey.
func HostfileConfigMap(job *v1alpha1.HPCJob, workers []Worker) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: v1alpha1.HostfileName(job.Name), Namespace: job.Namespace,
			Labels: map[string]string{v1alpha1.LabelJob: job.Name}, OwnerReferences: ownerRefs(job),
		},
		Data: map[string]string{
			mpi.HostfileKey:  Hostfile(job, workers),
			mpi.SSHConfigKey: mpi.SSHConfig(v1alpha1.ServiceName(job.Name), job.Namespace, job.Spec.SSHAuthMountPath, Hosts(workers)),
		},
	}
}

// SSHSecret holds the job's SSH key pair (type kubernetes.io/ssh-auth), owned by the job so that
// it goes with it. Its data must never be logged or put in an event.
func SSHSecret(job *v1alpha1.HPCJob, id mpi.Identity) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: v1alpha1.SSHSecretName(job.Name), Namespace: job.Namespace,
			Labels: map[string]string{v1alpha1.LabelJob: job.Name}, OwnerReferences: ownerRefs(job),
		},
		Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{mpi.SecretPrivateKey: id.PrivateKey, mpi.SecretPublicKey: id.AuthorizedKey},
	}
}
