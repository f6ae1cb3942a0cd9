package cgroup

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/opencontainers/cgroups"
)

// MaxProcessLimit bounds the limit of one Processes call.
const MaxProcessLimit = 4096

// ErrPIDNamespace reports a cgroup that holds processes outside the reader's PID namespace:
// cgroup v2 lists them as PID 0 (v1 leaves them out).
var ErrPIDNamespace = errors.New("processes outside this PID namespace")

// Processes is what runs in one container's cgroup.
type Processes struct {
	Container ContainerRef
	// Dir is the container's cgroup directory in the hierarchy that carries the cpuset
	// controller, whose cgroup.procs (and its sub-cgroups') were read.
	Dir string
	// Listed is how many processes the cgroups held when read; Limit how many of them were
	// read at most.
	Listed, Limit int
	// Processes are the Limit lowest PIDs among them that were still running when read, in PID
	// order.
	Processes []Process
}

// Truncated reports whether the cgroups held more processes than were read.
func (p Processes) Truncated() bool { return p.Listed > p.Limit }

// ProcessReader lists the processes of container cgroups and reads each one's allowed CPUs,
// memory nodes, name and MPI rank from a procfs. It only reads, and only below the layout's
// cpuset hierarchy and the procfs root.
type ProcessReader struct {
	layout Layout
	proc   procReader
}

// NewProcessReader reads the cgroups of layout l and the processes in procRoot, a procfs
// mounted for the PID namespace the cgroup file system reports PIDs in: the agent's own /proc
// when it shares the host's PID namespace.
func NewProcessReader(l Layout, procRoot string) (*ProcessReader, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(procRoot) || filepath.Clean(procRoot) != procRoot {
		return nil, fmt.Errorf("proc root %q: want a clean absolute path such as /proc", procRoot)
	}
	return &ProcessReader{layout: l, proc: procReader{root: procRoot}}, nil
}

// Processes lists the processes in a container's cgroup and its sub-cgroups (cgroup.procs of
// the cpuset hierarchy on v1, of the unified hierarchy on v2), keeps the limit lowest PIDs and
// reads each of them. Memory stays bounded by limit whatever the cgroup holds; processes that
// exit meanwhile are left out. A vanished container yields an error wrapping ErrVanished.
func (r *ProcessReader) Processes(ref ContainerRef, limit int) (Processes, error) {
	if err := ref.Validate(); err != nil {
		return Processes{}, fmt.Errorf("container cgroup: %w", err)
	}
	if limit < 1 || limit > MaxProcessLimit {
		return Processes{}, fmt.Errorf("container %s: process limit %d: want 1 to %d", ref, limit, MaxProcessLimit)
	}
	if err := r.checkPIDNamespace(); err != nil {
		return Processes{}, fmt.Errorf("container %s: %w", ref, err)
	}
	dir := r.layout.containerDir(CPUSet, ref)
	out := Processes{Container: ref, Dir: dir, Limit: limit}
	keep := &pidHeap{}
	if err := r.collect(ref, dir, "", keep, limit, &out.Listed, new(int)); err != nil {
		return Processes{}, err
	}
	members := keep.sorted()
	out.Processes = make([]Process, 0, len(members))
	for _, m := range members {
		p, err := r.proc.read(m.pid)
		if errors.Is(err, errExited) {
			continue
		}
		if err != nil {
			return Processes{}, fmt.Errorf("container %s: %w", ref, err)
		}
		p.Cgroup = m.cgroup
		out.Processes = append(out.Processes, p)
	}
	return out, nil
}

// collect reads the cgroup.procs of dir (rel below the container's cgroup), then of its
// sub-cgroups, counting every PID in listed and keeping the limit lowest in keep. walked counts
// the sub-cgroups visited, bounded like the writer's walk.
func (r *ProcessReader) collect(ref ContainerRef, dir, rel string, keep *pidHeap, limit int, listed, walked *int) error {
	if err := readPIDs(dir, func(pid int) {
		*listed++
		keep.offer(member{pid: pid, cgroup: rel}, limit)
	}); err != nil {
		// A sub-cgroup may vanish at any moment; a v2 threaded one has no process list of its
		// own (its processes are listed in the threaded domain above it).
		if rel != "" && (isGone(err) || errors.Is(err, syscall.EOPNOTSUPP)) {
			return nil
		}
		if isGone(err) {
			return fmt.Errorf("container %s: %s missing (the container exited or is not created yet): %w", ref, dir, ErrVanished)
		}
		return fmt.Errorf("container %s: %w", ref, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if rel != "" && isGone(err) {
			return nil
		}
		return fmt.Errorf("container %s: list %s: %w", ref, dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if *walked++; *walked > maxSubCgroups {
			return fmt.Errorf("container %s: more than %d sub-cgroups below %s: refusing to walk them", ref, maxSubCgroups, r.layout.containerDir(CPUSet, ref))
		}
		if err := r.collect(ref, filepath.Join(dir, e.Name()), filepath.Join(rel, e.Name()), keep, limit, listed, walked); err != nil {
			return err
		}
	}
	return nil
}

// maxSelfCgroupBytes bounds the read of /proc/1/cgroup (a line per v1 hierarchy).
const maxSelfCgroupBytes = 64 << 10

// checkPIDNamespace fails with ErrPIDNamespace when PID 1 of the procfs lives in a pod's cgroup:
// the reader then sits in a pod's own PID namespace, where cgroup v1 leaves every other
// container's processes out of cgroup.procs without a sign. PID 1's cgroup is read as the
// kernel shows it to the reader; where that says nothing (no such file, a cgroup namespace's
// "/"), the listing goes ahead and v2 still reports foreign processes as PID 0.
func (r *ProcessReader) checkPIDNamespace() error {
	f, err := os.Open(filepath.Join(r.proc.root, "1", "cgroup"))
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxSelfCgroupBytes))
	for sc.Scan() {
		// "hierarchy-ID:controller-list:path"; v2's line is "0::path".
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		v1 := r.layout.Mounts.Version == V1 && slices.Contains(strings.Split(parts[1], ","), string(CPUSet))
		v2 := r.layout.Mounts.Version == V2 && parts[0] == "0" && parts[1] == ""
		if !v1 && !v2 {
			continue
		}
		dir := filepath.Join(r.layout.Mounts.Root(CPUSet), filepath.Clean("/"+parts[2]))
		if loc, err := r.layout.ParseDir(dir); err == nil && loc.Level >= LevelPod {
			return fmt.Errorf("PID 1 of %s is in pod cgroup %s, so this reader runs in a pod's own PID namespace and cgroup.procs hides the %w; the node agent must share the host's PID namespace (hostPID: true)", r.proc.root, dir, ErrPIDNamespace)
		}
		return nil
	}
	return nil
}

// readPIDs streams a cgroup's cgroup.procs, one PID per line, without holding the list.
func readPIDs(dir string, each func(pid int)) error {
	f, err := cgroups.OpenFile(dir, fileProcs, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, ok := parsePID(sc.Bytes())
		switch {
		case !ok:
			return fmt.Errorf("%s: line %q is not a PID", filepath.Join(dir, fileProcs), truncate(sc.Text()))
		case pid == 0:
			return fmt.Errorf("%s lists PID 0: the cgroup holds %w; the node agent must share the host's PID namespace (hostPID: true)", filepath.Join(dir, fileProcs), ErrPIDNamespace)
		}
		each(pid)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(dir, fileProcs), err)
	}
	return nil
}

// parsePID reads one line of cgroup.procs: a decimal of at most ten digits.
func parsePID(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	pid := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, true
}

// member is one listed process and the sub-cgroup that holds it.
type member struct {
	pid    int
	cgroup string
}

// pidHeap keeps the lowest PIDs offered: a max-heap whose top is the highest PID kept.
type pidHeap []member

func (h pidHeap) Len() int           { return len(h) }
func (h pidHeap) Less(i, j int) bool { return h[i].pid > h[j].pid }
func (h pidHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pidHeap) Push(x any)        { *h = append(*h, x.(member)) }
func (h *pidHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	*h = old[:len(old)-1]
	return m
}

// offer keeps m if fewer than limit PIDs are kept or m's is lower than the highest kept.
func (h *pidHeap) offer(m member, limit int) {
	switch {
	case h.Len() < limit:
		heap.Push(h, m)
	case m.pid < (*h)[0].pid:
		(*h)[0] = m
		heap.Fix(h, 0)
	}
}

// sorted returns the kept members in PID order.
func (h pidHeap) sorted() []member {
	out := slices.Clone(h)
	slices.SortFunc(out, func(a, b member) int { return a.pid - b.pid })
	return out
}
