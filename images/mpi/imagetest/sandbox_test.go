package imagetest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// imageConfig is the part of an OCI image config the sandbox applies.
type imageConfig struct {
	Config struct {
		Entrypoint []string
		Cmd        []string
		Env        []string
		WorkingDir string
	} `json:"config"`
}

// unpacked is an image extracted to disk.
type unpacked struct {
	rootfs string
	config imageConfig
}

// unpack extracts the layers of the OCI archive at path, bottom first, into a fresh directory.
func unpack(t *testing.T, path string) unpacked {
	t.Helper()
	small := map[string][]byte{}
	err := eachEntry(path, func(name string, r io.Reader) error {
		if name != "index.json" && !strings.HasPrefix(name, "blobs/sha256/") {
			return nil
		}
		data, err := io.ReadAll(io.LimitReader(r, 1<<20))
		small[name] = data
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var index struct{ Manifests []struct{ Digest string } }
	if err := json.Unmarshal(small["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json of %s: %v (want one manifest, got %d)", path, err, len(index.Manifests))
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(small[blobName(index.Manifests[0].Digest)], &manifest); err != nil {
		t.Fatalf("manifest of %s: %v", path, err)
	}
	var img unpacked
	if err := json.Unmarshal(small[blobName(manifest.Config.Digest)], &img.config); err != nil {
		t.Fatalf("config of %s: %v", path, err)
	}
	img.rootfs = filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(img.rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, layer := range manifest.Layers {
		want := blobName(layer.Digest)
		err := eachEntry(path, func(name string, r io.Reader) error {
			if name != want {
				return nil
			}
			cmd := exec.Command("tar", "-x", "-p", "--numeric-owner", "-C", img.rootfs, "-f", "-")
			cmd.Stdin = r
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("tar -x of layer %s: %w: %s", layer.Digest, err, out)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("unpack %s: %v", path, err)
		}
	}
	return img
}

// eachEntry calls fn with every regular file of the tar archive at path.
func eachEntry(path string, fn func(name string, r io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			if err := fn(hdr.Name, tr); err != nil {
				return err
			}
		}
	}
}

func blobName(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

// sandbox is the shared network namespace of one test's containers: loopback and a veth pair
// whose both ends stay inside, one with an address of the benchmarking range (RFC 2544) standing
// in for the node's address. Nothing in it reaches beyond this machine.
type sandbox struct {
	t       *testing.T
	img     unpacked
	netns   string
	dir     string
	nodeIP  string
	authSrc string // the job's SSH directory on the host, laid out as a kubelet secret volume
	// otherKey is a private key that is not the job's.
	otherKey string
}

func newSandbox(t *testing.T, img unpacked) *sandbox {
	t.Helper()
	s := &sandbox{t: t, img: img, netns: fmt.Sprintf("finegrain-mpi-test-%d", os.Getpid()), dir: t.TempDir(), nodeIP: "198.18.0.1"}
	for _, args := range [][]string{
		{"netns", "add", s.netns},
		{"-n", s.netns, "link", "set", "lo", "up"},
		{"-n", s.netns, "link", "add", "node0", "type", "veth", "peer", "name", "node1"},
		{"-n", s.netns, "addr", "add", s.nodeIP + "/24", "dev", "node0"},
		{"-n", s.netns, "link", "set", "node0", "up"},
		{"-n", s.netns, "link", "set", "node1", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		if args[0] == "netns" {
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", s.netns).Run() })
		}
	}
	return s
}

// run runs a command of the image's root file system on the host side, chrooted, and returns its
// output; for tools such as ssh-keygen without depending on the host's.
func (s *sandbox) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("chroot", append([]string{s.img.rootfs}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("chroot %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// container is one running container: its namespaces' PID 1 and what it wrote.
type container struct {
	name  string
	cmd   *exec.Cmd
	out   *syncBuffer
	upper string
	init  int // host PID of the container's PID 1; 0 when it ended before the test saw it
	// exited is closed when the container has ended; err is then cmd.Wait's result.
	exited chan struct{}
	err    error
}

// containerSpec says how to start a container of the image.
type containerSpec struct {
	name   string
	env    []string          // added to the image's environment
	files  map[string]string // written into the container's file system before it starts
	cpuset string            // a cgroup v1 cpuset directory to start in; empty for none
	args   []string          // the container's command; none for the image's default
}

// roleScript runs in fresh mount, PID and IPC namespaces, as a pod's container on the host's
// network does (MPICH's UCX tries shared memory between two such containers when they share
// the IPC namespace, and fails without a common PID namespace): it builds the container's root from an
// overlay of the image, mounts /proc, /sys, /dev, a private /dev/shm and the job's SSH directory
// read-only (as the placer's secret volume), and starts the image's entrypoint as PID 1 in the
// image's working directory with only the given environment. A container in a cpuset cgroup sees
// it as runc 1.1 shows cgroup v1 to containers: a tmpfs at /sys/fs/cgroup with the container's own
// cgroup directory mounted read-only as the hierarchy, while /proc/self/cgroup names its full path.
const roleScript = `set -e
lower=$1 upper=$2 work=$3 root=$4 auth=$5 authdir=$6 workdir=$7 cpuset=$8
shift 8
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
if [ -n "$cpuset" ]; then
	mount -t tmpfs -o mode=755 cgroup "$root/sys/fs/cgroup"
	mkdir "$root/sys/fs/cgroup/cpuset"
	mount --bind "$cpuset" "$root/sys/fs/cgroup/cpuset"
	mount -o remount,bind,ro "$root/sys/fs/cgroup/cpuset"
fi
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
mkdir -p "$root$authdir"
mount --bind "$auth" "$root$authdir"
mount -o remount,bind,ro "$root$authdir"
exec chroot "$root" /bin/sh -c 'cd "$0" && exec /usr/bin/env -i "$@"' "$workdir" "$@"
`

// start starts a container and waits until its PID 1 runs (or the container has ended already).
func (s *sandbox) start(t *testing.T, spec containerSpec, authDir string) *container {
	t.Helper()
	c := &container{name: spec.name, out: &syncBuffer{}, exited: make(chan struct{})}
	base := filepath.Join(s.dir, spec.name)
	c.upper = filepath.Join(base, "upper")
	root := filepath.Join(base, "root")
	for _, d := range []string{c.upper, filepath.Join(base, "work"), root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range spec.files {
		full := filepath.Join(c.upper, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(append([]string{}, s.img.config.Config.Env...), spec.env...)
	argv := append(append(env, s.img.config.Config.Entrypoint...), spec.args...)
	// nsenter, unlike ip netns exec, keeps the host's /sys and so its cgroup hierarchies.
	inner := append([]string{"nsenter", "--net=/run/netns/" + s.netns,
		"unshare", "--mount", "--pid", "--ipc", "--fork", "--propagation", "private", "--kill-child",
		"/bin/sh", "-c", roleScript, "sh",
		s.img.rootfs, c.upper, filepath.Join(base, "work"), root, s.authSrc, authDir, s.img.config.Config.WorkingDir, spec.cpuset}, argv...)
	// The cgroup is joined before anything forks, so the container's processes all start in it.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `[ -z "$0" ] || echo $$ >"$0/cgroup.procs"; exec "$@"`, spec.cpuset}, inner...)...)
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start container %s: %v", spec.name, err)
	}
	c.cmd = cmd
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	s.t.Cleanup(c.kill)
	deadline := time.Now().Add(30 * time.Second)
	for c.init == 0 {
		select {
		case <-c.exited:
			return c
		default:
		}
		c.init = childOf(cmd.Process.Pid, "unshare")
		if time.Now().After(deadline) {
			t.Fatalf("container %s: no PID 1 after 30 s; output:\n%s", spec.name, c.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// childOf returns the first child of pid once pid runs the program comm (the shell wrapper and
// nsenter exec into it); 0 while there is none.
func childOf(pid int, comm string) int {
	name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(name)) != comm {
		return 0
	}
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(children))
	if len(fields) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(fields[0])
	return child
}

// wait waits for the container's PID 1 to end and returns the exit status unshare passes on.
func (c *container) wait(timeout time.Duration) (int, error) {
	select {
	case <-c.exited:
		var exit *exec.ExitError
		if errors.As(c.err, &exit) {
			return exit.ExitCode(), nil
		}
		return 0, c.err
	case <-time.After(timeout):
		c.kill()
		return -1, fmt.Errorf("container %s still ran after %v", c.name, timeout)
	}
}

// kill ends the container: SIGKILL to its PID 1 ends every process of its PID namespace, and
// unshare (--kill-child, in case PID 1 was not seen yet) follows.
func (c *container) kill() {
	if c.init != 0 {
		_ = syscall.Kill(c.init, syscall.SIGKILL)
	}
	_ = c.cmd.Process.Kill()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
	}
}

// file reads a file of the running container through its PID 1's root.
func (c *container) file(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", c.init, path))
	if err != nil {
		t.Fatalf("read %s in container %s: %v", path, c.name, err)
	}
	return string(data)
}

// zombies lists the zombie processes in the container's PID namespace.
func (c *container) zombies() ([]string, error) {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", c.init))
	if err != nil {
		return nil, err
	}
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	var found []string
	for _, p := range procs {
		if other, err := os.Readlink(p + "/ns/pid"); err != nil || other != ns {
			continue
		}
		stat, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ...: the state follows the last ')'.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i > 0 && strings.HasPrefix(s[i+1:], " Z") {
			found = append(found, strings.TrimSpace(s[:i+1]))
		}
	}
	return found, nil
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
