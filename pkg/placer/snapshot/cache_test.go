package snapshot

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// world is what the informers hold, as a property test drives it: the objects by name, and the
// placer's assumptions.
type world struct {
	r        *rand.Rand
	nodes    map[string]*corev1.Node
	maps     map[string]*unstructured.Unstructured
	pods     map[string]*corev1.Pod
	assumed  map[string]*corev1.Pod
	jobs     map[string]JobRecord
	versions int
}

var (
	worldNodes = []string{"n0", "n1", "n2", "n3", "n4"}
	worldPods  = []string{"a/p0", "a/p1", "a/p2", "a/p3", "b/p0", "b/p1", "a-b/p0", "b/q"}
	worldJobs  = []string{"a/j1", "a/j2", "b/j1"}
)

// worldScheduler is the placer's scheduler name in the world.
const worldScheduler = "finegrain-placer"

func (w *world) pick(list []string) string { return list[w.r.IntN(len(list))] }

func (w *world) node(name string) *corev1.Node {
	cpus := resource.MustParse(strconv.Itoa(8 + 8*w.r.IntN(3)))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": w.pick([]string{"x", "y"})}},
		Spec:       corev1.NodeSpec{Unschedulable: w.r.IntN(5) == 0},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(w.pick([]string{"32", "32", "32", "12"}))}, Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: cpus, corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110"),
			"example.com/gpu": resource.MustParse(strconv.Itoa(w.r.IntN(2))),
		}},
	}
	if w.r.IntN(4) == 0 {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "hpc", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// freeCoreMap is a NodeResourceTopology of one or two zones whose pins list some of the pods,
// now and then malformed.
func (w *world) freeCoreMap(name string) *unstructured.Unstructured {
	var zones []nrt.Zone
	for z := range 1 + w.r.IntN(2) {
		free := fmt.Sprintf("%d-%d", z*16+w.r.IntN(4), z*16+15)
		var pins []string
		for _, key := range worldPods {
			if w.r.IntN(4) == 0 {
				pins = append(pins, key+"/main="+strconv.Itoa(z*16))
			}
		}
		switch w.r.IntN(12) {
		case 0:
			free = "9-3"
		case 1:
			pins = append(pins, "a/p9=1")
		}
		q := func(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }
		zone := nrt.Zone{Name: nrt.ZoneName(z), Type: nrt.ZoneTypeNode,
			Attributes: []nrt.Attribute{{Name: nrt.AttrFreeCPUs, Value: free}, {Name: nrt.AttrPins, Value: strings.Join(pins, ";")}},
			Resources:  []nrt.ResourceInfo{{Name: nrt.ResourceCPU, Capacity: q(16), Allocatable: q(16), Available: q(w.r.IntN(17))}},
		}
		if w.r.IntN(2) == 0 {
			mem := *resource.NewQuantity(int64(8+w.r.IntN(24))<<30, resource.BinarySI)
			zone.Resources = append(zone.Resources, nrt.ResourceInfo{Name: nrt.ResourceMemory, Capacity: mem, Allocatable: mem, Available: mem})
		}
		zones = append(zones, zone)
	}
	o := &nrt.NodeResourceTopology{ObjectMeta: metav1.ObjectMeta{Name: name}, Zones: zones, Attributes: []nrt.Attribute{
		{Name: nrt.AttrGeneration, Value: strconv.Itoa(w.r.IntN(100))},
		{Name: nrt.AttrMinSharedCPUs, Value: "1"},
	}}
	if w.r.IntN(2) == 0 {
		o.Attributes = append(o.Attributes, nrt.Attribute{Name: nrt.AttrExclusiveAvailable, Value: strconv.Itoa(w.r.IntN(30))})
	}
	u, err := nrt.ToUnstructured(o)
	if err != nil {
		panic(err)
	}
	w.versions++
	u.SetResourceVersion(strconv.Itoa(w.versions))
	return u
}

func (w *world) pod(key string) *corev1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	cpu := w.pick([]string{"1", "2", "4", "500m"})
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(w.pick([]string{"1Gi", "2Gi"}))}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:   w.pick(append([]string{"", "gone"}, worldNodes...)),
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: res}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(w.pick([]string{"Running", "Running", "Succeeded"}))},
	}
	if w.r.IntN(2) == 0 {
		p.Labels[v1alpha1.LabelPinning] = v1alpha1.PinningExclusive
	}
	if w.r.IntN(2) == 0 {
		p.Annotations[v1alpha1.AnnotationNUMANode] = strconv.Itoa(w.r.IntN(3))
	}
	if w.r.IntN(3) == 0 {
		p.Labels[v1alpha1.LabelPodGroup] = w.pick([]string{"g1", "g2"})
		p.Annotations[v1alpha1.AnnotationExclusiveNodes] = w.pick([]string{"true", "false"})
	}
	if w.r.IntN(2) == 0 {
		p.Spec.SchedulerName = worldScheduler
	}
	if w.r.IntN(3) == 0 {
		// A worker of an HPCJob, or a pod that only claims to be one.
		job := w.pick([]string{"j1", "j2"})
		p.Labels[v1alpha1.LabelJob], p.Labels[v1alpha1.LabelRole] = job, w.pick([]string{v1alpha1.RoleWorker, v1alpha1.RoleWorker, v1alpha1.RoleLauncher})
		if w.r.IntN(4) > 0 {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind,
				Name: w.pick([]string{job, job, "j3"}), UID: types.UID(w.pick([]string{"uid-" + ns + "-" + job, "uid-x"})), Controller: &yes}}
		}
	}
	if w.r.IntN(3) == 0 {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: int32(2222 + w.r.IntN(3))}}
	}
	return p
}

// job is a random record of a job of the world: some pods named its workers, on some nodes.
func (w *world) job(key string) JobRecord {
	ns, name, _ := strings.Cut(key, "/")
	r := JobRecord{UID: types.UID("uid-" + ns + "-" + name), Exclusive: w.r.IntN(2) == 0, Workers: map[string]string{}}
	if w.r.IntN(5) == 0 {
		r.UID = "uid-older"
	}
	for _, pod := range worldPods {
		if pns, pname, _ := strings.Cut(pod, "/"); pns == ns && w.r.IntN(2) == 0 {
			r.Workers[pname] = w.pick(worldNodes)
		}
	}
	return r
}

// input is what Build is given for the world: every pod as its assumption shows it, if any.
func (w *world) input(gone map[string]bool) Input {
	in := Input{Gone: gone, SchedulerName: worldScheduler, Jobs: w.jobs}
	for _, n := range w.nodes {
		in.Nodes = append(in.Nodes, n)
	}
	for _, u := range w.maps {
		in.Topologies = append(in.Topologies, u)
	}
	for key, p := range w.pods {
		if _, ok := w.assumed[key]; !ok {
			in.Pods = append(in.Pods, p)
		}
	}
	for _, p := range w.assumed {
		in.Own = append(in.Own, p)
	}
	return in
}

func (w *world) assumedList() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range w.assumed {
		out = append(out, p)
	}
	return out
}

func sameSnapshot(t *testing.T, step int, what string, got, want *Snapshot) {
	t.Helper()
	opts := cmp.Options{cmp.AllowUnexported(Node{}, Zone{}), cmpopts.EquateEmpty()}
	if d := cmp.Diff(want.Nodes, got.Nodes, opts); d != "" {
		t.Fatalf("step %d, %s: nodes differ from Build (-build +cache):\n%s", step, what, d)
	}
	if d := cmp.Diff(want.Assumed(), got.Assumed(), opts); d != "" {
		t.Fatalf("step %d, %s: assumptions differ from Build (-build +cache):\n%s", step, what, d)
	}
	if d := cmp.Diff(want.Warnings(), got.Warnings(), opts); d != "" {
		t.Fatalf("step %d, %s: warnings differ from Build (-build +cache):\n%s", step, what, d)
	}
}

// TestCacheMatchesBuild drives a cache with random streams of informer events, assumptions and
// reservations, and checks after each step that the snapshot it hands out is what Build makes of
// the same objects — Build being the full rebuild the cache replaces.
func TestCacheMatchesBuild(t *testing.T) {
	for seed := range uint64(80) {
		w := &world{r: rand.New(rand.NewPCG(seed, 17)), nodes: map[string]*corev1.Node{}, maps: map[string]*unstructured.Unstructured{},
			pods: map[string]*corev1.Pod{}, assumed: map[string]*corev1.Pod{}, jobs: map[string]JobRecord{}}
		c := NewCache(worldScheduler)
		for step := range 150 {
			what := w.step(c)
			s := c.Snapshot()
			sameSnapshot(t, step, fmt.Sprintf("seed %d, %s", seed, what), s, Build(w.input(nil)))
			if w.r.IntN(3) == 0 {
				w.reserve(t, s)
			}
			if w.r.IntN(10) == 0 {
				gone := map[string]bool{w.pick(worldPods): true, w.pick(worldPods): true}
				sameSnapshot(t, step, fmt.Sprintf("seed %d, without %v", seed, gone), c.SnapshotWithout(gone), Build(w.input(gone)))
			}
		}
	}
}

// step applies one random event to the world and the cache and says which.
func (w *world) step(c *Cache) string {
	switch w.r.IntN(12) {
	case 10:
		key := w.pick(worldJobs)
		ns, name, _ := strings.Cut(key, "/")
		r := w.job(key)
		w.jobs[key] = r
		c.SetJob(ns, name, r)
		return "set job " + key
	case 11:
		key := w.pick(worldJobs)
		ns, name, _ := strings.Cut(key, "/")
		delete(w.jobs, key)
		c.DeleteJob(ns, name)
		return "delete job " + key
	case 0:
		n := w.node(w.pick(worldNodes))
		w.nodes[n.Name] = n
		c.SetNode(n)
		return "set node " + n.Name
	case 1, 4:
		name := w.pick(worldNodes)
		if w.r.IntN(2) == 0 {
			delete(w.nodes, name)
			c.DeleteNode(name)
			return "delete node " + name
		}
		delete(w.maps, name)
		c.DeleteTopology(name)
		return "delete map " + name
	case 2:
		u := w.freeCoreMap(w.pick(append([]string{"stray"}, worldNodes...)))
		w.maps[u.GetName()] = u
		c.SetTopology(u)
		return "set map " + u.GetName()
	case 3:
		name := w.pick(worldNodes)
		if u, ok := w.maps[name]; ok {
			c.SetTopology(u) // a resync: the same object again
		}
		return "resync map " + name
	case 5:
		key := w.pick(worldPods)
		delete(w.pods, key)
		ns, name, _ := strings.Cut(key, "/")
		c.DeletePod(ns, name)
		return "delete pod " + key
	case 6:
		key := w.pick(worldPods)
		if w.r.IntN(2) == 0 {
			delete(w.assumed, key)
		} else {
			w.assumed[key] = w.pod(key)
		}
		c.SetAssumed(w.assumedList())
		return "assume " + key
	default:
		p := w.pod(w.pick(worldPods))
		w.pods[p.Namespace+"/"+p.Name] = p
		c.SetPod(p)
		return "set pod " + p.Namespace + "/" + p.Name
	}
}

// reserve places a random pod on the snapshot; the next Snapshot must undo it.
func (w *world) reserve(t *testing.T, s *Snapshot) {
	t.Helper()
	if len(s.Nodes) == 0 {
		return
	}
	p := w.pod("c/reserved")
	p.Spec.NodeName, p.Status.Phase = s.Nodes[w.r.IntN(len(s.Nodes))].Name, corev1.PodRunning
	if err := s.Reserve(p); err != nil {
		t.Fatal(err)
	}
	_ = s.Capacity()
	_ = s.ByLoad(false)
}
