package snapshot

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Cache is the placer's view of the cluster, kept up to date by informer events: each event
// changes the state of the one node it concerns and moves that node's generation past every
// other's. Snapshot brings one snapshot up to date by copying only the nodes whose generation
// moved since it last did, so that a cycle costs what changed, not the size of the cluster.
//
// Pods come in two layers: the informer's (SetPod, DeletePod) and the placer's assumptions
// (SetAssumed), which stand in for the informer's copy of the same pod while they last. What an
// informer's pod claims counts only where the placer vouches for it (trust.go): the cache knows
// the placer's scheduler name and its HPCJobs (SetJob, DeleteJob). What the snapshot shows
// always equals Build over the same objects. Its methods may be called from any goroutine; the
// snapshot it returns belongs to the caller's.
type Cache struct {
	mu    sync.Mutex
	nodes map[string]*cachedNode
	pods  map[string]*cachedPod
	// assumed are the keys SetAssumed last gave.
	assumed map[string]bool
	trust   trust
	// labelled are the informer's pods by the HPCJob their label names ("namespace/name"), so
	// that a change of the job's record recounts them.
	labelled map[string]map[string]bool
	// generation counts changes; changed are the nodes whose generation moved past snap's.
	generation uint64
	changed    []*cachedNode
	// snap is the snapshot Snapshot hands out, up to generation snapGen; layout is false when
	// the set of nodes (or of maps without a node) changed since it was laid out.
	snap    *Snapshot
	snapGen uint64
	layout  bool
}

// cachedNode is one node's state and the part of a snapshot last made from it.
type cachedNode struct {
	nodeState
	// mapVersion is the resourceVersion of the map last read ("" when unknown).
	mapVersion string
	// generation is when the state last changed; view is the snapshot's node made from it at
	// viewGen.
	generation, viewGen uint64
	view                Node
	// index is the node's position in the snapshot, -1 when it is not in it.
	index int
}

// cachedPod is one pod's two layers and where it counts.
type cachedPod struct {
	informer, assumed *corev1.Pod
	// node is where the pod counts ("" nowhere), as info says.
	node string
	info podInfo
}

// NewCache returns an empty cache for the placer of the given scheduler name.
func NewCache(schedulerName string) *Cache {
	return &Cache{nodes: map[string]*cachedNode{}, pods: map[string]*cachedPod{}, assumed: map[string]bool{},
		trust: trust{schedulerName: schedulerName, jobs: map[string]JobRecord{}}, labelled: map[string]map[string]bool{}}
}

// Add feeds every object of in to the cache, as informers list them at start, in.Own as the
// assumptions (in.SchedulerName and in.Gone are not used: see NewCache and SnapshotWithout).
func (c *Cache) Add(in Input) {
	for _, n := range in.Nodes {
		c.SetNode(n)
	}
	for _, u := range in.Topologies {
		c.SetTopology(u)
	}
	for key, r := range in.Jobs {
		ns, name, _ := strings.Cut(key, "/")
		c.SetJob(ns, name, r)
	}
	for _, p := range in.Pods {
		c.SetPod(p)
	}
	if len(in.Own) > 0 {
		c.SetAssumed(in.Own)
	}
}

// SetJob records what the placer vouches for of an HPCJob; the pods labelled as its workers are
// looked at again.
func (c *Cache) SetJob(namespace, name string, r JobRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := namespace + "/" + name
	if old, ok := c.trust.jobs[key]; ok && old.equal(r) {
		return
	}
	c.trust.jobs[key] = r
	c.recountJob(key)
}

// DeleteJob forgets an HPCJob: no pod counts as its worker any more.
func (c *Cache) DeleteJob(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := namespace + "/" + name
	if _, ok := c.trust.jobs[key]; ok {
		delete(c.trust.jobs, key)
		c.recountJob(key)
	}
}

// recountJob recounts the informer's pods labelled with a job.
func (c *Cache) recountJob(job string) {
	for key := range c.labelled[job] {
		if e, ok := c.pods[key]; ok {
			c.recount(key, e)
		}
	}
}

// label files the informer's copy of a pod (nil once it is gone) under the job its label names.
func (c *Cache) label(key string, old, p *corev1.Pod) {
	var before, after string
	if old != nil && old.Labels[v1alpha1.LabelJob] != "" {
		before = old.Namespace + "/" + old.Labels[v1alpha1.LabelJob]
	}
	if p != nil && p.Labels[v1alpha1.LabelJob] != "" {
		after = p.Namespace + "/" + p.Labels[v1alpha1.LabelJob]
	}
	if before == after {
		return
	}
	if before != "" {
		delete(c.labelled[before], key)
		if len(c.labelled[before]) == 0 {
			delete(c.labelled, before)
		}
	}
	if after != "" {
		if c.labelled[after] == nil {
			c.labelled[after] = map[string]bool{}
		}
		c.labelled[after][key] = true
	}
}

// SetNode records a Node object, added or updated. An update that changes nothing a snapshot
// shows (a heartbeat, a condition) moves no generation.
func (c *Cache) SetNode(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.node(n.Name)
	if e.node != nil && e.sameBound(n) && reflect.DeepEqual(e.base, newNode(n)) {
		e.node = n
		return
	}
	c.layout = c.layout && e.node != nil
	e.setNode(n)
	c.moved(e)
}

// DeleteNode forgets a Node object.
func (c *Cache) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[name]; ok && e.node != nil {
		e.node, e.base, c.layout = nil, Node{}, false
		c.moved(e)
	}
}

// SetTopology records a NodeResourceTopology, added or updated; an update with the
// resourceVersion last read (an informer's resync) is not read again.
func (c *Cache) SetTopology(u *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.node(u.GetName())
	if rv := u.GetResourceVersion(); e.hasMap && rv != "" && rv == e.mapVersion {
		return
	}
	c.layout = c.layout && (e.hasMap || e.node != nil)
	e.setMap(u)
	e.mapVersion = u.GetResourceVersion()
	c.moved(e)
}

// DeleteTopology forgets a NodeResourceTopology.
func (c *Cache) DeleteTopology(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[name]; ok && e.hasMap {
		c.layout = c.layout && e.node != nil
		e.clearMap()
		e.mapVersion = ""
		c.moved(e)
	}
}

// SetPod records the informer's copy of a pod, added or updated.
func (c *Cache) SetPod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	e := c.pod(key)
	c.label(key, e.informer, p)
	e.informer = p
	c.recount(key, e)
}

// DeletePod forgets the informer's copy of a pod.
func (c *Cache) DeletePod(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := namespace + "/" + name
	if e, ok := c.pods[key]; ok && e.informer != nil {
		c.label(key, e.informer, nil)
		e.informer = nil
		c.recount(key, e)
	}
}

// Pod returns the informer's copy of a pod ("namespace/name"), nil when it has none.
func (c *Cache) Pod(key string) *corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[key]; ok {
		return e.informer
	}
	return nil
}

// SetAssumed replaces the placer's assumptions: each pod given stands in for the informer's copy
// of the same name until the next call leaves it out.
func (c *Cache) SetAssumed(pods []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[string]bool, len(pods))
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		now[key] = true
		if e := c.pod(key); e.assumed != p {
			e.assumed = p
			c.recount(key, e)
		}
	}
	for key := range c.assumed {
		if e, ok := c.pods[key]; ok && !now[key] {
			e.assumed = nil
			c.recount(key, e)
		}
	}
	c.assumed = now
}

// Snapshot returns the cluster as the cache shows it. While the set of nodes stays the same it
// is the same snapshot each time, brought up to date: the nodes whose generation moved since the
// last call are copied into it, and so are the nodes Reserve changed on it, which undoes those
// reservations. A node added or removed lays out a new one. The caller must be done with what
// the last call returned.
func (c *Cache) Snapshot() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == nil || !c.layout {
		c.snap = c.lay(nil, true)
		c.layout = true
	} else {
		s := c.snap
		for _, i := range s.touched {
			s.Nodes[i] = c.nodes[s.Nodes[i].Name].current()
		}
		for _, e := range c.changed {
			if e.index >= 0 {
				s.Nodes[e.index] = e.current()
			}
		}
		s.touched, s.byLoad, s.capacity = s.touched[:0], [2][]int32{}, nil
	}
	c.changed, c.snapGen = c.changed[:0], c.generation
	return c.snap
}

// SnapshotWithout returns a snapshot of its own, the pods gone names treated as deleted
// (Input.Gone): what the cluster would look like without them.
func (c *Cache) SnapshotWithout(gone map[string]bool) *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lay(gone, false)
}

// lay makes a snapshot of every node in name order, the pods gone names treated as deleted. For
// the snapshot Snapshot hands out (main), it records where each node is in it.
func (c *Cache) lay(gone map[string]bool, main bool) *Snapshot {
	order := make([]*cachedNode, 0, len(c.nodes))
	for _, e := range c.nodes {
		order = append(order, e)
	}
	slices.SortFunc(order, func(a, b *cachedNode) int { return cmp.Compare(a.name, b.name) })
	s := &Snapshot{Nodes: make([]Node, 0, len(order))}
	for _, e := range order {
		if main {
			e.index = -1
		}
		switch {
		case e.node == nil && e.hasMap:
			s.orphans = append(s.orphans, e.name)
		case e.node == nil:
		case len(gone) > 0 && e.holdsAny(gone):
			s.Nodes = append(s.Nodes, e.derive(gone))
		default:
			if main {
				e.index = len(s.Nodes)
			}
			s.Nodes = append(s.Nodes, e.current())
		}
	}
	return s
}

// current returns the node's part of a snapshot, made again when its state changed.
func (e *cachedNode) current() Node {
	if e.viewGen != e.generation {
		e.view, e.viewGen = e.derive(nil), e.generation
	}
	return e.view
}

func (e *cachedNode) holdsAny(keys map[string]bool) bool {
	for i := range e.pods {
		if keys[e.pods[i].key] {
			return true
		}
	}
	return false
}

// node returns the state of the named node, made empty when there is none.
func (c *Cache) node(name string) *cachedNode {
	e, ok := c.nodes[name]
	if !ok {
		e = &cachedNode{nodeState: nodeState{name: name}, index: -1}
		c.nodes[name] = e
	}
	return e
}

func (c *Cache) pod(key string) *cachedPod {
	e, ok := c.pods[key]
	if !ok {
		e = &cachedPod{}
		c.pods[key] = e
	}
	return e
}

// moved gives a node's changed state a new generation, and forgets a node nothing names any
// more.
func (c *Cache) moved(e *cachedNode) {
	c.generation++
	if e.generation <= c.snapGen {
		c.changed = append(c.changed, e)
	}
	e.generation = c.generation
	if e.node == nil && !e.hasMap && len(e.pods) == 0 {
		delete(c.nodes, e.name)
	}
}

// recount moves a pod to where its current layer (the assumption, else the informer's copy)
// says it counts, moving the generations of the nodes that changed.
func (c *Cache) recount(key string, e *cachedPod) {
	p, t := e.assumed, (*trust)(nil)
	if p == nil {
		p, t = e.informer, &c.trust
	}
	node := countedOn(p)
	var info podInfo
	if node != "" {
		info = newPodInfo(p, key, t)
	}
	if node != e.node || (node != "" && !info.equal(&e.info)) {
		if e.node != "" {
			old := c.nodes[e.node]
			old.pods = slices.Delete(old.pods, old.podIndex(key), old.podIndex(key)+1)
			c.moved(old)
		}
		if node != "" {
			n := c.node(node)
			n.pods = append(n.pods, info)
			c.moved(n)
		}
	}
	e.node, e.info = node, info
	if e.informer == nil && e.assumed == nil {
		delete(c.pods, key)
	}
}
