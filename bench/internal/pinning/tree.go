package pinning

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// tree is the bench's own kubelet-shaped cgroup tree, <mount>/<base>/kubepods/…, in the
// cpuset, cpu and memory hierarchies. It plays the kubelet's and the runtime's part: it creates
// pod and container cgroups and puts processes into them. The values are written by
// pkg/cgroup's writer, as the node agent writes them.
//
// How a process enters its container's cgroup: on cgroup v2 with clone3's CLONE_INTO_CGROUP
// (Linux 5.7) it is created there (cloneInto, openDir), so it never runs or allocates memory
// anywhere else — moving a running process on v2 migrates its pages to the new cpuset.mems,
// which under emulation stalled guests for seconds; on v1, where a process belongs to one cgroup
// per hierarchy and clone3 can name only one, its PID is written into each (attach) before it is
// released.
type tree struct {
	mounts    cgroup.Mounts
	layout    cgroup.Layout
	writer    *cgroup.FS
	log       *slog.Logger
	cloneInto bool
	created   []string // directories in creation order, removed in reverse
}

var treeControllers = []cgroup.Controller{cgroup.CPUSet, cgroup.CPU, cgroup.Memory}

// newTree creates <mount>/<base>/kubepods in every hierarchy finegrain writes.
func newTree(mounts cgroup.Mounts, base string, log *slog.Logger) (*tree, error) {
	layout, err := cgroup.NewLayout(mounts, cgroup.Cgroupfs, base)
	if err != nil {
		return nil, err
	}
	writer, err := cgroup.NewFS(layout, log)
	if err != nil {
		return nil, err
	}
	t := &tree{mounts: mounts, layout: layout, writer: writer, log: log, cloneInto: cloneIntoCgroup(mounts.Version, kernelRelease())}
	log.Debug("bench cgroup tree", "version", mounts.Version, "cloneIntoCgroup", t.cloneInto)
	for _, c := range treeControllers {
		if err := t.mkdirs(c, base, "kubepods"); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// mkdirs creates each missing component below the hierarchy root of c, in order.
func (t *tree) mkdirs(c cgroup.Controller, rel ...string) error {
	dir := t.mounts.Root(c)
	for _, part := range rel {
		for _, p := range strings.Split(part, "/") {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := t.mkdir(c, parent, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *tree) mkdir(c cgroup.Controller, parent, dir string) error {
	if slices.Contains(t.created, dir) {
		return nil
	}
	if t.mounts.Version == cgroup.V2 {
		// A v2 child gets only the controllers its parent enables for its subtree.
		if err := cgroups.WriteFile(parent, "cgroup.subtree_control", "+cpuset +cpu +memory"); err != nil {
			return fmt.Errorf("enable cpuset, cpu and memory below %s: %w", parent, err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	t.created = append(t.created, dir)
	if t.mounts.Version == cgroup.V1 && c == cgroup.CPUSet {
		// A new v1 cpuset is empty and takes no task; start from the parent's, as the kubelet does.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := cgroups.ReadFile(parent, f)
			if err != nil {
				return fmt.Errorf("read %s of %s: %w", f, parent, err)
			}
			if err := cgroups.WriteFile(dir, f, strings.TrimSpace(v)); err != nil {
				return fmt.Errorf("initialise %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// addContainer creates the cgroups of a new pod with one container of the given QoS class, named
// by fresh random IDs, and returns its reference.
func (t *tree) addContainer(qos cgroup.QOSClass) (cgroup.ContainerRef, error) {
	uid, err := randomHex(16)
	if err != nil {
		return cgroup.ContainerRef{}, err
	}
	id, err := randomHex(32)
	if err != nil {
		return cgroup.ContainerRef{}, err
	}
	ref, err := cgroup.NewContainerRef(uuid(uid), string(qos), "containerd://"+id)
	if err != nil {
		return cgroup.ContainerRef{}, err
	}
	for _, c := range treeControllers {
		dir, err := t.layout.ContainerDir(c, ref)
		if err != nil {
			return cgroup.ContainerRef{}, err
		}
		rel, err := filepath.Rel(t.mounts.Root(c), dir)
		if err != nil {
			return cgroup.ContainerRef{}, err
		}
		if err := t.mkdirs(c, rel); err != nil {
			return cgroup.ContainerRef{}, err
		}
	}
	return ref, nil
}

// apply writes the container's values through the node agent's writer.
func (t *tree) apply(ref cgroup.ContainerRef, want cgroup.Resources) error {
	res, err := t.writer.Apply(ref, want)
	if err != nil {
		return err
	}
	t.log.Debug("cgroup values applied", "container", ref.String(), "writes", len(res.Changes), "effectiveCPUs", res.EffectiveCPUs.String())
	return nil
}

// attach moves every thread of process pid into the container's cgroups of the controllers cs.
func (t *tree) attach(ref cgroup.ContainerRef, pid int, cs ...cgroup.Controller) error {
	for _, c := range cs {
		dir, err := t.layout.ContainerDir(c, ref)
		if err != nil {
			return err
		}
		if err := cgroups.WriteCgroupProc(dir, pid); err != nil {
			return fmt.Errorf("move process %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// openDir opens the container's cgroup v2 directory for clone3; the caller closes it.
func (t *tree) openDir(ref cgroup.ContainerRef) (*os.File, error) {
	dir, err := t.layout.ContainerDir(cgroup.CPUSet, ref)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s to create processes in: %w", dir, err)
	}
	return f, nil
}

// cloneIntoCgroup says whether processes can be created directly in a cgroup: cgroup v2 on a
// kernel release 5.7 or later.
func cloneIntoCgroup(v cgroup.Version, release string) bool {
	if v != cgroup.V2 {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 7
}

// kernelRelease is uname -r, or "" when it cannot be read.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// removeSince removes the directories created after the first n, newest first. The processes
// in them must have exited; a cgroup still busy is retried for a few seconds.
func (t *tree) removeSince(n int) error {
	var errs []error
	for i := len(t.created) - 1; i >= n; i-- {
		if err := rmdir(t.created[i]); err != nil {
			errs = append(errs, err)
		}
	}
	t.created = t.created[:n]
	return errors.Join(errs...)
}

// close removes everything the tree created.
func (t *tree) close() error { return t.removeSince(0) }

func rmdir(dir string) error {
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the kernel frees a cgroup shortly after its last task exits
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

func randomHex(bytes int) (string, error) {
	b := make([]byte, bytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random cgroup names: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// uuid spells 32 hex digits as a canonical UUID, the form pod UIDs take.
func uuid(h string) string {
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
