package hpcjob

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/placer/plan"
	"github.com/finegrain-dev/finegrain/pkg/placer/snapshot"
	st "github.com/finegrain-dev/finegrain/pkg/placer/snapshot/snapshottest"
)

func newJob(tasks int32, profile v1alpha1.Profile, gran v1alpha1.Granularity) *v1alpha1.HPCJob {
	job := &v1alpha1.HPCJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "finegrain.dev/v1alpha1", Kind: "HPCJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "hpc"},
		Spec: v1alpha1.HPCJobSpec{
			Tasks: tasks, Profile: profile, Granularity: gran,
			TaskResources: v1alpha1.TaskResources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
			Launcher:      corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mpirun", Image: "mpi"}}}},
			Worker:        corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "mpi"}}}},
		},
	}
	if gran == v1alpha1.GranularityNone {
		job.Spec.Workers = 2
	}
	v1alpha1.SetDefaults(&job.Spec)
	return job
}

// placements renders a plan as "worker:tasks@node/numa" in worker order.
func placements(jp *JobPlan) []string {
	at := map[int]string{}
	for _, p := range jp.Result.Placements {
		at[p.Member] = fmt.Sprintf("%s/%d", p.Node, p.NUMA)
	}
	var out []string
	for i, w := range jp.Workers {
		out = append(out, fmt.Sprintf("%d:%d@%s", w.Index, w.Tasks, at[i]))
	}
	return out
}

func mustPlan(t *testing.T, s *snapshot.Snapshot, job *v1alpha1.HPCJob) *JobPlan {
	t.Helper()
	if errs := v1alpha1.Validate(job); len(errs) > 0 {
		t.Fatalf("test job invalid: %v", errs)
	}
	jp, err := PlanJob(s, job, Options{SchedulerName: v1alpha1.DefaultSchedulerName})
	if err != nil {
		t.Fatal(err)
	}
	return jp
}

func TestChoose(t *testing.T) {
	spec := func(p v1alpha1.Profile, g v1alpha1.Granularity, tasks, workers int32) *v1alpha1.HPCJobSpec {
		return &v1alpha1.HPCJobSpec{Tasks: tasks, Profile: p, Granularity: g, Workers: workers}
	}
	tests := []struct {
		spec      *v1alpha1.HPCJobSpec
		available int
		want      Choice
	}{
		{spec(v1alpha1.ProfileCPU, v1alpha1.GranularityScale, 16, 0), 4, Choice{4, 4, 4}},
		{spec(v1alpha1.ProfileMemory, v1alpha1.GranularityScale, 16, 0), 40, Choice{16, 16, 16}},
		{spec(v1alpha1.ProfileCPU, v1alpha1.GranularityFine, 16, 0), 4, Choice{4, 16, 4}},
		{spec(v1alpha1.ProfileMemory, v1alpha1.GranularityFine, 3, 0), 4, Choice{3, 3, 3}},
		{spec(v1alpha1.ProfileCPU, v1alpha1.GranularityNone, 16, 3), 4, Choice{1, 3, 1}},
		{spec(v1alpha1.ProfileNetwork, v1alpha1.GranularityNone, 16, 3), 4, Choice{1, 3, 1}},
		{spec(v1alpha1.ProfileNetwork, v1alpha1.GranularityScale, 16, 0), 4, Choice{1, 1, 1}},
		{spec(v1alpha1.ProfileNetwork, v1alpha1.GranularityFine, 16, 0), 4, Choice{1, 1, 1}},
		{spec(v1alpha1.ProfileCPU, v1alpha1.GranularityScale, 16, 0), 0, Choice{}},
		{spec(v1alpha1.ProfileCPU, v1alpha1.GranularityFine, 16, 0), 0, Choice{}},
		{spec(v1alpha1.ProfileCPU, v1alpha1.GranularityScale, 50000, 0), 20000, Choice{10000, 10000, 10000}},
		// slotsPerWorker fixes Nw = Nt/slots; the profile and granularity choose nodes and groups.
		{slots(spec(v1alpha1.ProfileCPU, v1alpha1.GranularityScale, 16, 0), 4), 2, Choice{2, 4, 2}},
		{slots(spec(v1alpha1.ProfileMemory, v1alpha1.GranularityScale, 16, 0), 2), 40, Choice{8, 8, 8}},
		{slots(spec(v1alpha1.ProfileNetwork, v1alpha1.GranularityScale, 16, 0), 4), 4, Choice{1, 4, 1}},
		{slots(spec(v1alpha1.ProfileCPU, v1alpha1.GranularityNone, 16, 0), 8), 4, Choice{1, 2, 1}},
		{slots(spec(v1alpha1.ProfileCPU, v1alpha1.GranularityScale, 16, 0), 4), 0, Choice{}},
	}
	for _, tc := range tests {
		if got := Choose(tc.spec, tc.available); got != tc.want {
			t.Errorf("Choose(%s/%s, %d tasks, %d available) = %+v, want %+v", tc.spec.Profile, tc.spec.Granularity, tc.spec.Tasks, tc.available, got, tc.want)
		}
	}
}

func slots(spec *v1alpha1.HPCJobSpec, n int32) *v1alpha1.HPCJobSpec {
	spec.SlotsPerWorker = n
	return spec
}

// With slotsPerWorker every worker runs that many tasks and the hostfile gives it that many
// slots; a cpu job spreads the workers over the nodes, one task group each.
func TestSlotsPerWorker(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 4, 2, 18, 64))
	job := newJob(12, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.SlotsPerWorker = 3
	jp := mustPlan(t, s, job)
	if jp.Choice != (Choice{4, 4, 4}) {
		t.Errorf("choice %+v, want 4 nodes, 4 workers, 4 groups", jp.Choice)
	}
	if d := cmp.Diff([]string{"0:3@n-0000/0", "1:3@n-0001/0", "2:3@n-0002/0", "3:3@n-0003/0"}, placements(jp)); d != "" {
		t.Errorf("placements (-want +got):\n%s", d)
	}
	want := "j-worker-0.j-workers.hpc.svc slots=3\nj-worker-1.j-workers.hpc.svc slots=3\nj-worker-2.j-workers.hpc.svc slots=3\nj-worker-3.j-workers.hpc.svc slots=3\n"
	if got := Hostfile(job, jp.Workers); got != want {
		t.Errorf("hostfile\n%s\nwant\n%s", got, want)
	}
	if cpu := jp.Pods[0].Spec.Containers[0].Resources.Requests.Cpu().Value(); cpu != 3 {
		t.Errorf("worker CPU request %d, want 3 (slotsPerWorker x taskResources.cpu)", cpu)
	}

	// A worker of 20 tasks fits no NUMA node of 18 CPUs: the job says so in those words.
	job = newJob(40, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.SlotsPerWorker = 20
	if _, err := PlanJob(s, job, Options{SchedulerName: v1alpha1.DefaultSchedulerName}); err == nil || !strings.Contains(err.Error(), "no node can take even one worker of slotsPerWorker 20 tasks") {
		t.Errorf("error %v", err)
	}
}

// A launcher that runs as a worker takes the first slotsPerWorker ranks (first in the hostfile,
// as localhost) and exclusive cores of one NUMA node like a worker; the job has one worker fewer.
func TestRunLauncherAsWorker(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 2, 2, 8, 64))
	job := newJob(12, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.SlotsPerWorker, job.Spec.RunLauncherAsWorker = 4, true
	jp := mustPlan(t, s, job)
	if jp.Choice.Workers != 2 || len(jp.Workers) != 2 {
		t.Errorf("choice %+v, %d workers; want 2 workers besides the launcher", jp.Choice, len(jp.Workers))
	}
	want := "localhost slots=4\nj-worker-0.j-workers.hpc.svc slots=4\nj-worker-1.j-workers.hpc.svc slots=4\n"
	if jp.Hostfile != want {
		t.Errorf("hostfile\n%s\nwant\n%s", jp.Hostfile, want)
	}
	l := jp.Launcher
	if l.Labels[v1alpha1.LabelPinning] != v1alpha1.PinningExclusive || l.Spec.Containers[0].Resources.Limits.Cpu().Value() != 4 ||
		l.Spec.Containers[0].Resources.Requests.Memory().Value() != 4<<30 {
		t.Errorf("launcher labels %v, resources %+v; want pinned with 4 CPUs and 4Gi", l.Labels, l.Spec.Containers[0].Resources)
	}
	if jp.Result.Launcher == nil || jp.Result.Launcher.NUMA < 0 {
		t.Errorf("launcher placement %+v, want exclusive cores in a NUMA node", jp.Result.Launcher)
	}
	// Two workers and the launcher, 4 CPUs each, on 2 nodes of 2 NUMA nodes of 8: no NUMA node
	// holds more than 8 of them.
	used := map[string]int{}
	for _, pl := range jp.Result.Placements {
		used[fmt.Sprintf("%s/%d", pl.Node, pl.NUMA)] += 4
	}
	used[fmt.Sprintf("%s/%d", jp.Result.Launcher.Node, jp.Result.Launcher.NUMA)] += 4
	for z, n := range used {
		if n > 8 {
			t.Errorf("NUMA node %s holds %d pinned CPUs of 8", z, n)
		}
	}
}

func TestSplitTasks(t *testing.T) {
	for _, tc := range []struct {
		tasks, workers int
		want           []int
	}{{16, 3, []int{6, 5, 5}}, {16, 4, []int{4, 4, 4, 4}}, {3, 3, []int{1, 1, 1}}, {7, 1, []int{7}}, {5, 0, nil}} {
		if got := SplitTasks(tc.tasks, tc.workers); !slices.Equal(got, tc.want) {
			t.Errorf("SplitTasks(%d, %d) = %v, want %v", tc.tasks, tc.workers, got, tc.want)
		}
	}
}

// Workers are numbered group by group, so consecutive ranks share a group.
func TestWorkersAndHostfile(t *testing.T) {
	job := newJob(10, v1alpha1.ProfileCPU, v1alpha1.GranularityFine)
	ws := Workers(job, SplitTasks(10, 10), 4)
	var groups []int
	for i, w := range ws {
		groups = append(groups, w.Group)
		if w.Index != i || w.Name != fmt.Sprintf("j-worker-%d", i) {
			t.Errorf("worker %d = %+v", i, w)
		}
	}
	if want := []int{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}; !slices.Equal(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
	ws = Workers(job, SplitTasks(16, 3), 3)
	want := "j-worker-0.j-workers.hpc.svc slots=6\nj-worker-1.j-workers.hpc.svc slots=5\nj-worker-2.j-workers.hpc.svc slots=5\n"
	if got := Hostfile(job, ws); got != want {
		t.Errorf("hostfile\n%s\nwant\n%s", got, want)
	}
	job.Spec.MPIImplementation = v1alpha1.MPICH
	want = "j-worker-0.j-workers.hpc.svc:6\nj-worker-1.j-workers.hpc.svc:5\nj-worker-2.j-workers.hpc.svc:5\n"
	if got := Hostfile(job, ws); got != want {
		t.Errorf("MPICH hostfile\n%s\nwant\n%s", got, want)
	}
}

func TestWorkerAndLauncherPods(t *testing.T) {
	job := newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.UID = "uid-1"
	job.Spec.ExclusiveNodes = true
	job.Spec.Worker.Labels = map[string]string{"app": "lulesh", v1alpha1.LabelRole: "spoofed"}
	job.Spec.Worker.Annotations = map[string]string{v1alpha1.AnnotationNUMANode: "3"}
	job.Spec.Worker.Spec.Containers = append(job.Spec.Worker.Spec.Containers, corev1.Container{Name: "sidecar"})
	w := WorkerPod(job, Worker{Index: 1, Name: "j-worker-1", Tasks: 6, Group: 1, Port: 22}, "finegrain-placer")
	wantLabels := map[string]string{"app": "lulesh", v1alpha1.LabelJob: "j", v1alpha1.LabelRole: v1alpha1.RoleWorker, v1alpha1.LabelPinning: v1alpha1.PinningExclusive}
	if d := cmp.Diff(wantLabels, w.Labels); d != "" {
		t.Errorf("worker labels (-want +got):\n%s", d)
	}
	wantAnn := map[string]string{v1alpha1.AnnotationGroup: "1", v1alpha1.AnnotationTasks: "6", v1alpha1.AnnotationExclusiveNodes: "true"}
	if d := cmp.Diff(wantAnn, w.Annotations); d != "" {
		t.Errorf("worker annotations (-want +got):\n%s", d)
	}
	c := w.Spec.Containers[0]
	if c.Resources.Requests.Cpu().String() != "6" || c.Resources.Limits.Memory().String() != "6Gi" {
		t.Errorf("worker resources = %v", c.Resources)
	}
	if w.Spec.SchedulerName != "finegrain-placer" || w.Spec.Hostname != "j-worker-1" || w.Spec.Subdomain != "j-workers" {
		t.Errorf("worker spec scheduler %q hostname %q subdomain %q", w.Spec.SchedulerName, w.Spec.Hostname, w.Spec.Subdomain)
	}
	if len(w.OwnerReferences) != 1 || w.OwnerReferences[0].UID != "uid-1" || !*w.OwnerReferences[0].Controller {
		t.Errorf("owner references %v", w.OwnerReferences)
	}
	if job.Spec.Worker.Spec.Containers[0].Resources.Requests != nil || len(job.Spec.Worker.Annotations) != 1 {
		t.Error("WorkerPod changed the job's template")
	}
	if cpus, _ := snapshot.PinnedDemand(w); cpus != 6 {
		t.Errorf("the worker pod asks the agent for %d CPUs, want 6", cpus)
	}

	job.Spec.Launcher.Labels = map[string]string{v1alpha1.LabelPinning: v1alpha1.PinningExclusive}
	l := LauncherPod(job, "finegrain-placer")
	if l.Name != "j-launcher" || l.Labels[v1alpha1.LabelRole] != v1alpha1.RoleLauncher || l.Labels[v1alpha1.LabelPinning] != "" {
		t.Errorf("launcher meta %v", l.ObjectMeta)
	}
	if l.Spec.RestartPolicy != corev1.RestartPolicyNever || l.Spec.Volumes[0].ConfigMap.Name != "j-hostfile" ||
		l.Spec.Containers[0].VolumeMounts[0].MountPath != "/etc/mpi" || l.Spec.Containers[0].Env[0].Value != HostfilePath {
		t.Errorf("launcher spec %+v", l.Spec)
	}
	svc := Service(job)
	if svc.Name != "j-workers" || svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector[v1alpha1.LabelRole] != v1alpha1.RoleWorker {
		t.Errorf("service %+v", svc)
	}
	if cm := HostfileConfigMap(job, []Worker{{Hostname: "h", Tasks: 2}}); cm.Name != "j-hostfile" || cm.Data[mpi.HostfileKey] != "h slots=2\n" ||
		!strings.Contains(cm.Data[mpi.SSHConfigKey], "Host *.j-workers *.j-workers.hpc") {
		t.Errorf("configmap %+v", cm)
	}
}

// envOf returns a container's environment as a map.
func envOf(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// mountAt returns the volume mounted at path in c, and the pod's volume of that name.
func mountAt(pod *corev1.Pod, c *corev1.Container, path string) (*corev1.VolumeMount, *corev1.Volume) {
	for i := range c.VolumeMounts {
		if m := &c.VolumeMounts[i]; m.MountPath == path {
			for j := range pod.Spec.Volumes {
				if v := &pod.Spec.Volumes[j]; v.Name == m.Name {
					return m, v
				}
			}
			return m, nil
		}
	}
	return nil, nil
}

// The MPI wiring of a job: every pod gets the job's SSH files; workers an sshd port, a readiness
// probe on it and the entrypoint's environment; the launcher the variables that make a bare
// mpirun use the hostfile and SSH configuration.
func TestPodsCarryTheMPIWiring(t *testing.T) {
	job := newJob(4, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.SSHAuthMountPath = "/home/mpi/.ssh"
	job.Spec.Launcher.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OMPI_MCA_plm_rsh_args", Value: "-v"}}
	w := WorkerPod(job, NewWorker(job, 0, 4, 0), "finegrain-placer")
	c := &w.Spec.Containers[0]
	if len(c.Ports) != 1 || c.Ports[0] != (corev1.ContainerPort{Name: "ssh", ContainerPort: 22, Protocol: corev1.ProtocolTCP}) {
		t.Errorf("worker ports %+v, want ssh 22 without a host port on a pod network", c.Ports)
	}
	if p := c.StartupProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != 22 || c.ReadinessProbe != nil {
		t.Errorf("worker startup probe %+v (readiness probe %+v), want a TCP startup probe on port 22 and no readiness probe", p, c.ReadinessProbe)
	}
	if w.Spec.RestartPolicy != corev1.RestartPolicyNever || w.Spec.DNSPolicy != "" {
		t.Errorf("worker restartPolicy %q dnsPolicy %q, want Never and the default", w.Spec.RestartPolicy, w.Spec.DNSPolicy)
	}
	want := map[string]string{mpi.EnvImplementation: "OpenMPI", mpi.EnvSSHPort: "22", mpi.EnvSSHDir: "/home/mpi/.ssh"}
	if d := cmp.Diff(want, envOf(c)); d != "" {
		t.Errorf("worker env (-want +got):\n%s", d)
	}
	m, v := mountAt(w, c, "/home/mpi/.ssh")
	if m == nil || !m.ReadOnly || v == nil || v.Projected == nil || len(v.Projected.Sources) != 2 {
		t.Fatalf("worker SSH mount %+v volume %+v", m, v)
	}
	sec, cfg := v.Projected.Sources[0].Secret, v.Projected.Sources[1].ConfigMap
	if sec.Name != "j-ssh" || len(sec.Items) != 3 || sec.Items[0].Path != "id_ed25519" || *sec.Items[0].Mode != 0o400 ||
		sec.Items[2].Path != "authorized_keys" || cfg.Name != "j-hostfile" || cfg.Items[0].Path != "config" {
		t.Errorf("worker SSH volume %+v %+v", sec, cfg)
	}

	l := LauncherPod(job, "finegrain-placer")
	lc := &l.Spec.Containers[0]
	env := envOf(lc)
	if env["OMPI_MCA_plm_rsh_args"] != "-v" || env["OMPI_MCA_orte_default_hostfile"] != HostfilePath || env[mpi.EnvImplementation] != "OpenMPI" {
		t.Errorf("launcher env %v: want the template's own rsh args kept and the hostfile set", env)
	}
	if m, v := mountAt(l, lc, "/home/mpi/.ssh"); m == nil || v == nil || v.Projected == nil {
		t.Errorf("launcher has no SSH mount: %+v", lc.VolumeMounts)
	}
	if m, v := mountAt(l, lc, "/etc/mpi"); m == nil || v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "j-hostfile" {
		t.Errorf("launcher has no hostfile mount: %+v", lc.VolumeMounts)
	}

	// On the node's network: the port is also the host port, and cluster DNS is asked for.
	job.Spec.Worker.Spec.HostNetwork = true
	job.Spec.Launcher.Spec.HostNetwork = true
	job.Spec.MPIImplementation = v1alpha1.MPICH
	w = WorkerPod(job, Worker{Index: 0, Name: "j-worker-0", Tasks: 4, Port: 20003}, "finegrain-placer")
	c = &w.Spec.Containers[0]
	if c.Ports[0].HostPort != 20003 || c.StartupProbe.TCPSocket.Port.IntValue() != 20003 || envOf(c)[mpi.EnvSSHPort] != "20003" ||
		w.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("host-network worker: ports %+v probe %+v env %v dnsPolicy %q", c.Ports, c.StartupProbe, envOf(c), w.Spec.DNSPolicy)
	}
	l = LauncherPod(job, "finegrain-placer")
	if env := envOf(&l.Spec.Containers[0]); env["HYDRA_HOST_FILE"] != HostfilePath || env["OMPI_MCA_orte_default_hostfile"] != "" ||
		l.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("MPICH launcher env %v dnsPolicy %q", env, l.Spec.DNSPolicy)
	}
}

// Workers on their node's network get ports free on their nodes; a worker not placed yet gets
// one no other worker of the job has.
func TestAssignSSHPorts(t *testing.T) {
	in := st.Uniform("n", 2, 1, 8, 64)
	busy := st.Pod("other", "sshd", "n-0000", "1", "", true)
	busy.Spec.HostNetwork = true
	busy.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 20000}}
	in.Pods = []*corev1.Pod{busy}
	s := snapshot.Build(in)
	job := newJob(4, v1alpha1.ProfileCPU, v1alpha1.GranularityFine)
	ws := Workers(job, SplitTasks(4, 4), 2)
	r := mpi.PortRange{First: 20000, Last: 20009}
	if err := AssignSSHPorts(job, s, r, ws, []string{"n-0000", "n-0000", "n-0001", ""}); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Port != 22 {
			t.Fatalf("pod-network worker %s got port %d, want 22", w.Name, w.Port)
		}
	}
	job.Spec.Worker.Spec.HostNetwork = true
	if err := AssignSSHPorts(job, s, r, ws, []string{"", "n-0000", "n-0000", "n-0001"}); err != nil {
		t.Fatal(err)
	}
	var got []int32
	for _, w := range ws {
		got = append(got, w.Port)
	}
	if d := cmp.Diff([]int32{20003, 20001, 20002, 20000}, got); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	if err := AssignSSHPorts(job, s, mpi.PortRange{First: 20000, Last: 20001}, ws, []string{"n-0000", "n-0000", "n-0001", "n-0001"}); err == nil ||
		!strings.Contains(err.Error(), "n-0000") {
		t.Errorf("two workers and one free port on n-0000: error %v, want one naming the node", err)
	}
}

// The paper's worked cases: 16 tasks on four nodes of two 18-CPU NUMA nodes.
func TestPaperWorkedCases(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 4, 2, 18, 64))
	each := func(n, tasks int, nodes ...string) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%d:%d@%s", i, tasks, nodes[i]))
		}
		return out
	}
	rep := func(s string, n int) []string { return slices.Repeat([]string{s}, n) }
	spread := slices.Concat(rep("n-0000/0", 4), rep("n-0001/0", 4), rep("n-0002/0", 4), rep("n-0003/0", 4))
	tests := []struct {
		profile v1alpha1.Profile
		gran    v1alpha1.Granularity
		choice  Choice
		want    []string
	}{
		{v1alpha1.ProfileCPU, v1alpha1.GranularityScale, Choice{4, 4, 4}, each(4, 4, "n-0000/0", "n-0001/0", "n-0002/0", "n-0003/0")},
		{v1alpha1.ProfileMemory, v1alpha1.GranularityScale, Choice{4, 4, 4}, each(4, 4, "n-0000/0", "n-0001/0", "n-0002/0", "n-0003/0")},
		{v1alpha1.ProfileCPU, v1alpha1.GranularityFine, Choice{4, 16, 4}, each(16, 1, spread...)},
		{v1alpha1.ProfileMemory, v1alpha1.GranularityFine, Choice{4, 16, 4}, each(16, 1, spread...)},
		{v1alpha1.ProfileCPU, v1alpha1.GranularityNone, Choice{1, 2, 1}, each(2, 8, "n-0000/0", "n-0000/0")},
		{v1alpha1.ProfileNetwork, v1alpha1.GranularityNone, Choice{1, 2, 1}, each(2, 8, "n-0000/0", "n-0000/0")},
		{v1alpha1.ProfileNetwork, v1alpha1.GranularityScale, Choice{1, 1, 1}, each(1, 16, "n-0000/0")},
		{v1alpha1.ProfileNetwork, v1alpha1.GranularityFine, Choice{1, 1, 1}, each(1, 16, "n-0000/0")},
	}
	for _, tc := range tests {
		for _, policy := range []v1alpha1.PlacementPolicy{v1alpha1.LeastLoaded, v1alpha1.MostLoaded} {
			t.Run(fmt.Sprintf("%s/%s/%s", tc.profile, tc.gran, policy), func(t *testing.T) {
				job := newJob(16, tc.profile, tc.gran)
				job.Spec.Placement = policy
				jp := mustPlan(t, s, job)
				if jp.Choice != tc.choice {
					t.Errorf("choice %+v, want %+v", jp.Choice, tc.choice)
				}
				if d := cmp.Diff(tc.want, placements(jp)); d != "" {
					t.Errorf("placements (-want +got):\n%s", d)
				}
				if jp.Result.Launcher == nil || jp.Result.Launcher.Node != "n-0000" {
					t.Errorf("launcher %+v, want beside the workers on n-0000", jp.Result.Launcher)
				}
			})
		}
	}
}

// The placement policy decides between equally scored nodes by load.
func TestPoliciesOnLoadedCluster(t *testing.T) {
	in := st.Uniform("n", 4, 2, 18, 64)
	in.Pods = []*corev1.Pod{
		st.Pod("web", "a", "n-0000", "6", "", false), st.Pod("web", "b", "n-0001", "2", "", false),
		st.Pod("web", "c", "n-0002", "12", "", false), st.Pod("web", "d", "n-0003", "9", "", false),
	}
	s := snapshot.Build(in)
	for policy, want := range map[v1alpha1.PlacementPolicy]string{v1alpha1.LeastLoaded: "n-0001", v1alpha1.MostLoaded: "n-0002"} {
		job := newJob(16, v1alpha1.ProfileNetwork, v1alpha1.GranularityScale)
		job.Spec.Placement = policy
		if got := mustPlan(t, s, job).Result.Placements[0].Node; got != want {
			t.Errorf("%s: network job on %s, want %s", policy, got, want)
		}
	}
	job := newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.Tasks = 2
	job.Spec.Placement = v1alpha1.MostLoaded
	if got := placements(mustPlan(t, s, job)); !slices.Equal(got, []string{"0:1@n-0002/0", "1:1@n-0003/0"}) {
		t.Errorf("most-loaded scale job of 2 tasks: %v", got)
	}
}

// Nodes differ: Algorithm 1 counts the nodes that fit a task, Algorithm 4 uses the room left.
func TestUnevenCluster(t *testing.T) {
	in := snapshot.Input{
		Nodes: []*corev1.Node{st.Node("n1", 36, "128Gi", nil), st.Node("n2", 36, "128Gi", nil), st.Node("n3", 36, "128Gi", nil),
			st.Node("n4", 36, "128Gi", nil), st.Node("n5", 36, "128Gi", nil)},
		Topologies: []*unstructured.Unstructured{
			st.NRT("n1", 1, st.Zone{Free: "0-3", Available: -1}, st.Zone{Free: "18-21", Available: -1}),
			st.NRT("n2", 1, st.Zone{Free: "0-17", Available: -1}, st.Zone{Free: "18-35", Available: -1}),
			st.NRT("n3", 1, st.Zone{Free: "0-7", Available: -1}, st.Zone{Free: "", Available: -1}),
			st.NRT("n4", 1, st.Zone{Free: "0-1", Available: -1}, st.Zone{Free: "18-19", Available: -1}),
		},
	}
	s := snapshot.Build(in)
	jp := mustPlan(t, s, newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityScale))
	want := []string{"0:4@n1/0", "1:4@n2/0", "2:4@n3/0", "3:4@n2/0"}
	if jp.Choice != (Choice{4, 4, 4}) || !slices.Equal(placements(jp), want) {
		t.Errorf("scale: choice %+v placements %v, want 4/4/4 and %v (n4 fits one task but not four; n5 has no map; n1's 8 free CPUs take one worker, not two, since the agent keeps one shared; so does n3's; the fourth worker goes to n2, the only node left with room)", jp.Choice, placements(jp), want)
	}
	jp = mustPlan(t, s, newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityFine))
	count := map[string]int{}
	for _, p := range jp.Result.Placements {
		count[p.Node]++
	}
	// n4's 4 free CPUs take 3 one-CPU workers (one stays shared); the fourth of its group goes to
	// n1, which has 7 CPUs for pinned workers.
	if d := cmp.Diff(map[string]int{"n1": 5, "n2": 4, "n3": 4, "n4": 3}, count); d != "" {
		t.Errorf("granularity: workers per node (-want +got):\n%s", d)
	}
}

func TestTaintedCluster(t *testing.T) {
	in := st.Uniform("n", 4, 2, 18, 64)
	gpu := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	in.Nodes[0].Spec.Taints = []corev1.Taint{gpu}
	in.Nodes[1].Spec.Taints = []corev1.Taint{gpu}
	in.Nodes[2].Spec.Unschedulable = true
	s := snapshot.Build(in)
	jp := mustPlan(t, s, newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityScale))
	if jp.Choice != (Choice{1, 1, 1}) || !slices.Equal(placements(jp), []string{"0:16@n-0003/0"}) {
		t.Errorf("choice %+v placements %v, want one worker of 16 on the only schedulable node", jp.Choice, placements(jp))
	}
	job := newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.Worker.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	if jp := mustPlan(t, s, job); jp.Choice != (Choice{3, 3, 3}) {
		t.Errorf("tolerating the taint: choice %+v, want 3/3/3", jp.Choice)
	}
	job.Spec.Worker.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "riscv64"}
	_, err := PlanJob(s, job, Options{SchedulerName: "finegrain-placer"})
	if err == nil || !strings.Contains(err.Error(), "no node can take even one task: HPCJob hpc/j: member j-worker-0") ||
		!strings.Contains(err.Error(), "3 do not match the nodeSelector kubernetes.io/arch=riscv64, 1 untolerated taint node.kubernetes.io/unschedulable:NoSchedule") {
		t.Errorf("error %v", err)
	}
}

// Enough free CPUs in total but no NUMA node big enough for a worker.
func TestFragmentedCluster(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 4, 2, 6, 64))
	job := newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityNone)
	_, err := PlanJob(s, job, Options{SchedulerName: "finegrain-placer"})
	if err == nil || !strings.Contains(err.Error(), "member j-worker-0 (8 exclusive CPUs in one NUMA node, requests cpu 8, memory 8Gi) fits none of 4 nodes: 4 have no NUMA node with 8 free CPUs and 8Gi free memory (the largest has 6)") {
		t.Errorf("error %v", err)
	}
	jp := mustPlan(t, s, newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityScale))
	if jp.Choice != (Choice{4, 4, 4}) {
		t.Errorf("scale on the fragmented cluster: %+v", jp.Choice)
	}
	// A network job that does not fit one NUMA node splits into the fewest workers that fit,
	// packed as one group: 16 tasks over NUMA nodes of 6 → 3 workers, two sharing a node.
	jp = mustPlan(t, s, newJob(16, v1alpha1.ProfileNetwork, v1alpha1.GranularityScale))
	if jp.Choice != (Choice{2, 3, 1}) || !slices.Equal(placements(jp), []string{"0:6@n-0000/0", "1:5@n-0000/1", "2:5@n-0001/0"}) {
		t.Errorf("network split: choice %+v placements %v", jp.Choice, placements(jp))
	}
	if jp.Note != "network job does not fit one NUMA node: split into 3 workers on 2 nodes" {
		t.Errorf("note %q", jp.Note)
	}
}

// A network job that would fit one NUMA node of an idle node waits for one on a busy cluster
// instead of spreading; one that never could is split by the cluster's shape, not its load.
func TestNetworkJobWaitsRatherThanSpreads(t *testing.T) {
	idle := st.Uniform("n", 4, 2, 18, 64)
	busy := idle
	busy.Pods = nil
	for _, n := range idle.Nodes {
		for z := range 2 {
			p := st.Pod("hpc", fmt.Sprintf("other-%s-%d", n.Name, z), n.Name, "12", "", true)
			p.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(z)
			busy.Pods = append(busy.Pods, p)
		}
	}
	s := snapshot.Build(busy)
	_, err := PlanJob(s, newJob(16, v1alpha1.ProfileNetwork, v1alpha1.GranularityScale), Options{SchedulerName: "finegrain-placer"})
	var fe *plan.FitError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "member j-worker-0 (16 exclusive CPUs in one NUMA node") ||
		!strings.Contains(err.Error(), "waits for a NUMA node to hold them (it is split only when none ever could)") {
		t.Errorf("16-task network job on NUMA nodes of 18 with 6 free each: %v, want it to wait whole", err)
	}

	wide := newJob(40, v1alpha1.ProfileNetwork, v1alpha1.GranularityScale)
	jp := mustPlan(t, snapshot.Build(idle), wide)
	if jp.Choice != (Choice{2, 3, 1}) || !slices.Equal(placements(jp), []string{"0:14@n-0000/0", "1:13@n-0000/1", "2:13@n-0001/0"}) {
		t.Errorf("40-task network job on idle NUMA nodes of 18: choice %+v placements %v", jp.Choice, placements(jp))
	}
	_, err = PlanJob(s, wide, Options{SchedulerName: "finegrain-placer"})
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "network job does not fit one NUMA node and waits to run as 3 workers") {
		t.Errorf("40-task network job on the busy cluster: %v, want it to wait for 3 workers", err)
	}
}

// A stale free-core map never double-books: pinned pods the agent has not reported yet hold
// their cores.
func TestStaleCluster(t *testing.T) {
	in := st.Uniform("n", 2, 2, 18, 64)
	a := st.Pod("hpc", "old-worker-0", "n-0000", "10", "", true)
	a.Annotations[v1alpha1.AnnotationNUMANode] = "0"
	b := st.Pod("hpc", "old-worker-1", "n-0000", "10", "", true)
	b.Annotations[v1alpha1.AnnotationNUMANode] = "1"
	in.Pods = []*corev1.Pod{a, b}
	job := newJob(12, v1alpha1.ProfileNetwork, v1alpha1.GranularityScale)
	job.Spec.Placement = v1alpha1.MostLoaded
	jp := mustPlan(t, snapshot.Build(in), job)
	if got := placements(jp); !slices.Equal(got, []string{"0:12@n-0001/0"}) {
		t.Errorf("placements %v: n-0000 has only 8 free CPUs per NUMA node once its unreported pods count", got)
	}
	// Once the agent reports them, the same answer comes from the map itself.
	in.Topologies[0] = st.NRT("n-0000", 2,
		st.Zone{Free: "10-17", Available: -1, Pins: "hpc/old-worker-0/main=0-9"},
		st.Zone{Free: "28-35", Available: -1, Pins: "hpc/old-worker-1/main=18-27"})
	s := snapshot.Build(in)
	if len(s.Assumed()) != 0 {
		t.Errorf("assumed %v", s.Assumed())
	}
	if got := placements(mustPlan(t, s, job)); !slices.Equal(got, []string{"0:12@n-0001/0"}) {
		t.Errorf("placements %v", got)
	}
}

func TestElastic(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 2, 1, 18, 64))
	job := newJob(64, v1alpha1.ProfileCPU, v1alpha1.GranularityScale)
	job.Spec.Elastic = &v1alpha1.Elastic{MinReplicas: 2, MaxReplicas: 8}
	v1alpha1.SetDefaults(&job.Spec)
	jp := mustPlan(t, s, job)
	if jp.Choice != (Choice{4, 4, 4}) || jp.Note != "elastic job started with 4 of at most 8 workers" {
		t.Errorf("choice %+v note %q", jp.Choice, jp.Note)
	}
	for _, w := range jp.Workers {
		if w.Tasks != 8 {
			t.Errorf("worker %s runs %d tasks, want 8", w.Name, w.Tasks)
		}
	}
	job.Spec.Elastic.MinReplicas = 5
	if _, err := PlanJob(s, job, Options{SchedulerName: "finegrain-placer"}); err == nil || !strings.Contains(err.Error(), "elastic job does not fit even at minReplicas 5") {
		t.Errorf("error %v", err)
	}
}

// An elastic job starts with workers of the shape the controller expands it with: the first k
// of ElasticWorker, spread one group each, or packed in one for a network job.
func TestElasticStartsWithElasticWorkers(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 2, 2, 18, 64))
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfileCPU, v1alpha1.ProfileNetwork} {
		job := newJob(32, profile, v1alpha1.GranularityScale)
		job.Spec.Elastic = &v1alpha1.Elastic{MinReplicas: 1, MaxReplicas: 4}
		v1alpha1.SetDefaults(&job.Spec)
		jp := mustPlan(t, s, job)
		if len(jp.Workers) == 0 {
			t.Fatalf("%s: no workers", profile)
		}
		for i, w := range jp.Workers {
			if want := ElasticWorker(job, i); w != want {
				t.Errorf("%s: worker %d is %+v, the controller would add %+v", profile, i, w, want)
			}
		}
	}
}

func TestMinAvailableJob(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 2, 1, 9, 64))
	job := newJob(24, v1alpha1.ProfileCPU, v1alpha1.GranularityNone)
	job.Spec.Workers = 3
	if _, err := PlanJob(s, job, Options{SchedulerName: "finegrain-placer"}); err == nil {
		t.Fatal("three 8-CPU workers fit two 9-CPU nodes")
	}
	two := int32(2)
	job.Spec.Gang.MinAvailable = &two
	jp := mustPlan(t, s, job)
	if len(jp.Result.Placements) != 2 || len(jp.Result.Unplaced) != 1 {
		t.Errorf("placed %d, unplaced %v", len(jp.Result.Placements), jp.Result.Unplaced)
	}
}

// Options.NoTaskGroups reaches the gang: a fine-grained job under most-loaded keeps its task
// groups on separate nodes with task groups on, and packs every worker onto the most loaded node
// with them off (the groups still split the workers).
func TestPlanJobTaskGroupsOff(t *testing.T) {
	s := snapshot.Build(st.Uniform("n", 4, 2, 18, 64))
	job := newJob(16, v1alpha1.ProfileCPU, v1alpha1.GranularityFine)
	job.Spec.Placement = v1alpha1.MostLoaded
	for _, off := range []bool{false, true} {
		jp, err := PlanJob(s, job, Options{SchedulerName: v1alpha1.DefaultSchedulerName, NoTaskGroups: off})
		if err != nil {
			t.Fatal(err)
		}
		if jp.Gang.NoTaskGroups != off {
			t.Errorf("task groups off %v: gang has NoTaskGroups %v", off, jp.Gang.NoTaskGroups)
		}
		want := jp.Choice.Groups
		if off {
			want = 1
		}
		if jp.Choice.Groups < 2 || jp.Result.NodesUsed != want {
			t.Errorf("task groups off %v: %d groups on %d nodes, want %d nodes: %v", off, jp.Choice.Groups, jp.Result.NodesUsed, want, placements(jp))
		}
	}
}
