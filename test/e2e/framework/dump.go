package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	// dumpTimeout bounds the whole failure dump of one test.
	dumpTimeout = 30 * time.Second
	// maxLineLen cuts the kubelet's long log lines in the dump.
	maxLineLen = 400
)

// failureDump is what one test dumps when it fails.
type failureDump struct {
	mu       sync.Mutex
	pods     []podRef
	sections []section
}

type podRef struct{ ns, name string }

type section struct {
	title string
	write func(ctx context.Context, w io.Writer) error
}

var (
	dumpsMu sync.Mutex
	dumps   = map[testing.TB]*failureDump{}
)

// dumpFor returns t's failure dump, registering it on first use: when t has failed by the time
// it ends, the dump is logged with t.Log.
func (c *Cluster) dumpFor(t testing.TB) *failureDump {
	dumpsMu.Lock()
	defer dumpsMu.Unlock()
	if d, ok := dumps[t]; ok {
		return d
	}
	d := &failureDump{}
	dumps[t] = d
	t.Cleanup(func() {
		dumpsMu.Lock()
		delete(dumps, t)
		dumpsMu.Unlock()
		if !t.Failed() {
			return
		}
		var b strings.Builder
		c.writeDump(&b, d)
		t.Logf("failure dump of %s:\n%s", t.Name(), b.String())
	})
	return d
}

// DumpOnFailure adds pods ns/names to what t dumps if it fails: each pod's spec and status, the
// events about it, its containers' logs and cgroup files. Every dump also holds the node's state,
// the logs of every pod in SystemNamespace (the agent, the placer) and the tail of the kubelet's
// log. CreatePod calls it for the pods it creates.
func (c *Cluster) DumpOnFailure(t testing.TB, ns string, names ...string) {
	d := c.dumpFor(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range names {
		d.pods = append(d.pods, podRef{ns, n})
	}
}

// OnFailure adds a section of its own to what t dumps if it fails, e.g. the agent's checkpoint.
func (c *Cluster) OnFailure(t testing.TB, title string, write func(ctx context.Context, w io.Writer) error) {
	d := c.dumpFor(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sections = append(d.sections, section{title, write})
}

func (c *Cluster) writeDump(w io.Writer, d *failureDump) {
	ctx, cancel := context.WithTimeout(context.Background(), dumpTimeout)
	defer cancel()
	d.mu.Lock()
	pods := append([]podRef(nil), d.pods...)
	sections := append([]section(nil), d.sections...)
	d.mu.Unlock()

	for _, p := range pods {
		c.dumpPod(ctx, w, p.ns, p.name, 100)
	}
	for _, n := range c.Nodes {
		fmt.Fprintf(w, "===== node %s\n", n.Name)
		c.dumpNode(ctx, w, n.Name)
	}
	fmt.Fprintf(w, "===== pods in namespace %s\n", SystemNamespace)
	system, err := c.Client.CoreV1().Pods(SystemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(w, "list: %v\n", err)
	} else if len(system.Items) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	if system != nil {
		for _, p := range system.Items {
			c.dumpPod(ctx, w, p.Namespace, p.Name, 200)
		}
	}
	for _, s := range sections {
		fmt.Fprintf(w, "===== %s\n", s.title)
		if err := s.write(ctx, w); err != nil {
			fmt.Fprintf(w, "error: %v\n", err)
		}
	}
	lines := max(40/len(c.Nodes), 15)
	for _, n := range c.Nodes {
		fmt.Fprintf(w, "===== last lines of %s\n%s\n", n.KubeletLog, tailFile(n.KubeletLog, lines))
	}
}

// dumpPod writes a pod's object, events, container logs (the last tail lines) and cgroup files.
func (c *Cluster) dumpPod(ctx context.Context, w io.Writer, ns, name string, tail int64) {
	fmt.Fprintf(w, "===== pod %s/%s\n", ns, name)
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(w, "get: %v\n", err)
	} else {
		shown := pod.DeepCopy()
		shown.ManagedFields = nil
		if data, err := yaml.Marshal(shown); err == nil {
			w.Write(data)
		}
	}
	fmt.Fprintln(w, "--- events")
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		fmt.Fprintf(w, "list: %v\n", err)
	} else {
		items := events.Items
		sort.Slice(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
		for _, e := range items {
			fmt.Fprintf(w, "%s %s %s (%s, x%d): %s\n", eventTime(e).Format(time.RFC3339), e.Type, e.Reason, e.Source.Component, e.Count, e.Message)
		}
	}
	if pod == nil {
		return
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, s := range statuses {
		for _, previous := range []bool{false, true} {
			if previous && s.RestartCount == 0 {
				continue
			}
			opts := &corev1.PodLogOptions{Container: s.Name, TailLines: ptr.To(tail), Previous: previous}
			data, err := c.Client.CoreV1().Pods(ns).GetLogs(name, opts).DoRaw(ctx)
			fmt.Fprintf(w, "--- log of container %s (previous=%v, last %d lines)\n", s.Name, previous, tail)
			if err != nil {
				fmt.Fprintf(w, "error: %v\n", err)
			} else {
				w.Write(data)
			}
		}
		fmt.Fprintf(w, "--- cgroup of container %s\n", s.Name)
		for _, f := range cgroupFiles {
			dir, err := c.CgroupDir(pod, s.Name, f.controller)
			if err != nil {
				fmt.Fprintf(w, "%v\n", err)
				break
			}
			if v, err := ReadCgroupFile(dir, f.file); err == nil {
				fmt.Fprintf(w, "%s/%s = %s\n", dir, f.file, v)
			}
		}
	}
}

func (c *Cluster) dumpNode(ctx context.Context, w io.Writer, name string) {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(w, "get: %v\n", err)
		return
	}
	for _, cond := range node.Status.Conditions {
		fmt.Fprintf(w, "condition %s=%s (%s) %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	for _, taint := range node.Spec.Taints {
		fmt.Fprintf(w, "taint %s\n", taint.ToString())
	}
	fmt.Fprintf(w, "allocatable cpu=%s memory=%s pods=%s\n", node.Status.Allocatable.Cpu(), node.Status.Allocatable.Memory(), node.Status.Allocatable.Pods())
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// tailFile returns the last lines of a file (reading at most its last 64 KiB), each cut to
// maxLineLen bytes.
func tailFile(name string, lines int) string {
	f, err := os.Open(name)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(st.Size()-window, io.SeekStart); err != nil {
			return err.Error()
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	for i, line := range all {
		if len(line) > maxLineLen {
			all[i] = line[:maxLineLen] + " [...]"
		}
	}
	return strings.Join(all, "\n")
}
