package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// Event reasons of the I/O limits.
const (
	ReasonIOLimited      = "IOLimited"
	ReasonIOLimitCleared = "IOLimitCleared"
	ReasonIOLimitFailed  = "IOLimitFailed"
)

// ioLookupTimeout bounds the API lookups (ReplicaSet, Deployment, StatefulSet metadata) that
// place one pod under an objective.
const ioLookupTimeout = 2 * time.Second

// IOLimiter writes pods' block I/O bandwidth limits; cgroup.FS is the real one.
type IOLimiter interface {
	ApplyIO(pod cgroup.PodRef, containers []cgroup.ContainerID, devs []cgroup.Device, want cgroup.IOLimit) (cgroup.Result, error)
}

var _ IOLimiter = (*cgroup.FS)(nil)

// ioPod is the agent's memory of one pod's I/O limit (loop-only).
type ioPod struct {
	// gen is the objectives' generation the decision was made at; objective and want the
	// decision.
	gen       uint64
	objective string
	want      cgroup.IOLimit
	// written is true once want reached the pod's cgroups; ctrs is how many of its container
	// cgroups the agent knew then (cgroup v1 writes each, so a new one needs a write).
	written bool
	ctrs    int
	// limited is true while the agent holds a non-zero limit on the pod (for the cleared event).
	limited bool
	lastErr string
}

// IOReport is what one I/O step did, by pod (namespace/name).
type IOReport struct {
	Limited, Cleared, Repaired []string
	Errors                     []error
}

// ioEnabled reports whether the agent enforces I/O limits: a limiter, an objective source and
// at least one device.
func (a *Agent) ioEnabled() bool {
	return a.d.IO != nil && a.d.Objectives != nil && len(a.d.IODevices) > 0
}

// enforceIO brings every pod of the node to the I/O bandwidth its ServiceObjective's
// status.podSize.ioBandwidth gives it (read and write each, on the node's devices), or to no
// limit when no objective holds it. A pod is placed under an objective once per objectives
// generation, and again at every full resync (a pod can leave its target); its cgroups are
// written when the decision changed, when it has container cgroups the last write did not
// cover, and at every full resync, which repairs drift. Until the objectives have been listed it
// does nothing, so a restart never clears a limit it cannot yet justify. Loop-only.
func (a *Agent) enforceIO(ctx context.Context, full bool) IOReport {
	var rep IOReport
	gen, ok := a.d.Objectives.Generation()
	if !ok {
		return rep
	}
	if a.ioPods == nil {
		a.ioPods = map[string]*ioPod{}
	}
	present := map[string]bool{}
	for _, obj := range a.informer.GetStore().List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName != a.opts.NodeName || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		uid, err := cgroup.ParsePodUID(string(pod.UID))
		if err != nil {
			continue
		}
		qos, err := cgroup.ParseQOSClass(string(pod.Status.QOSClass))
		if err != nil {
			continue
		}
		present[string(pod.UID)] = true
		a.enforcePodIO(ctx, pod, cgroup.PodRef{UID: uid, QOS: qos}, gen, full, &rep)
	}
	for uid := range a.ioPods {
		if !present[uid] {
			delete(a.ioPods, uid)
		}
	}
	return rep
}

func (a *Agent) enforcePodIO(ctx context.Context, pod *corev1.Pod, ref cgroup.PodRef, gen uint64, full bool, rep *IOReport) {
	name := pod.Namespace + "/" + pod.Name
	st := a.ioPods[string(pod.UID)]
	if st == nil {
		st = &ioPod{}
		a.ioPods[string(pod.UID)] = st
	}
	decided := st.gen == gen && !full && st.gen != 0
	if !decided {
		lctx, cancel := context.WithTimeout(ctx, ioLookupTimeout)
		bps, key, err := a.d.Objectives.PodIOBandwidth(lctx, pod)
		cancel()
		if err != nil {
			st.gen = 0
			a.ioFailed(pod, st, fmt.Errorf("pod %s: find its ServiceObjective: %w", name, err), rep)
			return
		}
		want := cgroup.IOLimit{ReadBPS: bps, WriteBPS: bps}
		if want != st.want || key != st.objective {
			st.written = false
		}
		st.gen, st.objective, st.want = gen, key, want
	}
	ctrs := a.podContainerIDs(string(pod.UID))
	switch {
	case full:
	case st.written && len(ctrs) == st.ctrs:
		return
	case decided && st.lastErr != "":
		// A write that failed is retried at the next full resync or decision, not every tick.
		return
	}
	res, err := a.d.IO.ApplyIO(ref, ctrs, a.d.IODevices, st.want)
	if errors.Is(err, cgroup.ErrVanished) {
		return
	}
	if err != nil {
		a.ioFailed(pod, st, err, rep)
		return
	}
	wasWritten := st.written
	st.written, st.ctrs, st.lastErr = true, len(ctrs), ""
	if len(res.Changes) == 0 {
		st.limited = st.want != (cgroup.IOLimit{})
		return
	}
	devs := deviceList(a.d.IODevices)
	switch {
	case wasWritten:
		rep.Repaired = append(rep.Repaired, name)
		a.hooks.IOLimitWritten(IORepaired)
		a.log.Info("repaired drifted I/O limit", "pod", name, "objective", st.objective, "bytesPerSecond", st.want.ReadBPS, "devices", devs, "changes", len(res.Changes))
	case st.want == cgroup.IOLimit{}:
		rep.Cleared = append(rep.Cleared, name)
		a.hooks.IOLimitWritten(IOCleared)
		a.log.Info("cleared I/O limit", "pod", name, "devices", devs)
		if st.limited {
			a.d.Recorder.Eventf(pod, corev1.EventTypeNormal, ReasonIOLimitCleared, "I/O bandwidth no longer limited on devices %s: no ServiceObjective holds the pod", devs)
		}
	default:
		rep.Limited = append(rep.Limited, name)
		a.hooks.IOLimitWritten(IOSet)
		a.log.Info("set I/O limit", "pod", name, "objective", st.objective, "bytesPerSecond", st.want.ReadBPS, "devices", devs)
		a.d.Recorder.Eventf(pod, corev1.EventTypeNormal, ReasonIOLimited, "I/O bandwidth limited to %d bytes/s read and %d bytes/s write on devices %s, as ServiceObjective %s decides",
			st.want.ReadBPS, st.want.WriteBPS, devs, st.objective)
	}
	st.limited = st.want != (cgroup.IOLimit{})
}

// ioFailed counts, logs and reports (once per distinct message) a failed I/O step: a failed
// lookup is retried at the next tick, a failed write at the next full resync or decision.
func (a *Agent) ioFailed(pod *corev1.Pod, st *ioPod, err error, rep *IOReport) {
	rep.Errors = append(rep.Errors, err)
	st.written = false
	a.hooks.Failed(ErrIOLimit)
	if msg := err.Error(); msg != st.lastErr {
		st.lastErr = msg
		a.log.Error("cannot enforce the pod's I/O limit; retrying", "pod", pod.Namespace+"/"+pod.Name, "reason", msg)
		a.d.Recorder.Event(pod, corev1.EventTypeWarning, ReasonIOLimitFailed, msg)
	}
}

// podContainerIDs returns the container cgroups the agent knows for a pod, sorted.
func (a *Agent) podContainerIDs(uid string) []cgroup.ContainerID {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []cgroup.ContainerID
	for ref := range a.st.ctrs {
		if string(ref.Pod.UID) == uid {
			ids = append(ids, ref.Container)
		}
	}
	slices.SortFunc(ids, func(x, y cgroup.ContainerID) int { return strings.Compare(x.ID, y.ID) })
	return ids
}

func deviceList(devs []cgroup.Device) string {
	s := make([]string, len(devs))
	for i, d := range devs {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}
