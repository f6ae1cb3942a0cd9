package cgroup

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/cgroups"
	"k8s.io/utils/cpuset"
)

// cpusetEqual compares CPU sets by content in cmp.Diff.
var cpusetEqual = cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })

func TestMain(m *testing.M) {
	// Fixture trees live in temporary directories, not on a cgroup file system; the library's
	// test mode lets it open files there (and makes writes create-or-truncate, which never
	// creates a directory, so vanished cgroups still vanish).
	cgroups.TestMode = true
	os.Exit(m.Run())
}

// Fixture hosts have 8 CPUs on 2 NUMA nodes.
const (
	hostCPUs = "0-7"
	hostMems = "0-1"
	// v1 reads an unlimited memory.limit_in_bytes back as LONG_MAX rounded down to a page.
	v1MemUnlimited = "9223372036854771712"
)

// Identifiers used across the tests.
const (
	uidA   = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	uidB   = "11111111-2222-3333-4444-555555555555"
	hexID  = "7c4f7e5a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e"
	hexID2 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)

// fixture is a fake cgroup root laid out like the kernel's hierarchies, found through a
// mountinfo file like a real host's.
type fixture struct {
	t      testing.TB
	root   string
	layout Layout
	fs     *FS
}

func newFixture(t testing.TB, v Version, d Driver) *fixture {
	t.Helper()
	root := t.TempDir()
	var mi strings.Builder
	mi.WriteString("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n")
	hier := []string{"unified"}
	if v == V1 {
		hier = []string{"cpuset", "cpu,cpuacct", "memory"}
		fmt.Fprintf(&mi, "40 27 0:40 / %s rw,relatime - cgroup2 cgroup2 rw\n", filepath.Join(root, "v1-hybrid-unified"))
	}
	for i, h := range hier {
		mp := filepath.Join(root, h)
		if v == V1 {
			fmt.Fprintf(&mi, "%d 27 0:%d / %s rw,relatime - cgroup cgroup rw,%s\n", 30+i, 30+i, mp, h)
		} else {
			fmt.Fprintf(&mi, "%d 27 0:%d / %s rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n", 30+i, 30+i, mp)
		}
	}
	mountinfo := filepath.Join(root, "mountinfo")
	writeFile(t, mountinfo, mi.String())
	m, err := DetectMounts(mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != v {
		t.Fatalf("fixture mountinfo detected as %s, want %s", m.Version, v)
	}
	l, err := NewLayout(m, d, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewFS(l, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{t: t, root: root, layout: l, fs: w}
	for _, h := range hier {
		fx.mkCgroup(filepath.Join(root, h), h)
	}
	return fx
}

// mkCgroup creates one cgroup directory with the files the kernel would show in hierarchy h,
// copying the parent's cpuset the way runc does for a new v1 cgroup.
func (fx *fixture) mkCgroup(dir, h string) {
	fx.t.Helper()
	if _, err := os.Stat(dir); err == nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fx.t.Fatal(err)
	}
	parentCPUs, parentMems := hostCPUs, hostMems
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), fileCPUs)); err == nil && h == "cpuset" {
		parentCPUs = strings.TrimSpace(string(b))
		b, _ = os.ReadFile(filepath.Join(filepath.Dir(dir), fileMems))
		parentMems = strings.TrimSpace(string(b))
	}
	files := map[string]map[string]string{
		"cpuset":      {fileCPUs: parentCPUs, fileMems: parentMems, fileV1EffCPUs: parentCPUs, fileV1EffMems: parentMems, fileMemMigrate: "0"},
		"cpu,cpuacct": {filePeriod: "100000", fileQuota: "-1", fileShares: "1024"},
		"memory":      {fileMemLimit: v1MemUnlimited},
		"unified": {
			fileCPUs: "", fileMems: "", fileV2EffCPUs: hostCPUs, fileV2EffMems: hostMems, filePartition: partitionMember,
			fileCPUMax: "max 100000", fileWeight: "100", fileMemMax: "max",
		},
	}[h]
	for name, content := range files {
		writeFile(fx.t, filepath.Join(dir, name), content+"\n")
	}
}

// hierarchies returns the fixture's hierarchy directory names.
func (fx *fixture) hierarchies() []string {
	if fx.layout.Mounts.Version == V1 {
		return []string{"cpuset", "cpu,cpuacct", "memory"}
	}
	return []string{"unified"}
}

// addContainer creates the container's cgroup and every missing ancestor in every hierarchy.
func (fx *fixture) addContainer(ref ContainerRef) {
	fx.t.Helper()
	for _, h := range fx.hierarchies() {
		dir := filepath.Join(fx.root, h)
		for _, part := range fx.layout.Driver.containerParts(ref) {
			dir = filepath.Join(dir, part)
			fx.mkCgroup(dir, h)
		}
	}
}

// removeContainer removes the container's cgroup in every hierarchy, as the runtime does when
// the container exits.
func (fx *fixture) removeContainer(ref ContainerRef) {
	fx.t.Helper()
	for _, c := range controllers {
		if err := os.RemoveAll(fx.layout.containerDir(c, ref)); err != nil {
			fx.t.Fatal(err)
		}
	}
}

func (fx *fixture) dir(c Controller, ref ContainerRef) string { return fx.layout.containerDir(c, ref) }

func (fx *fixture) podDir(c Controller, ref ContainerRef) string {
	return filepath.Dir(fx.layout.containerDir(c, ref))
}

func (fx *fixture) read(dir, file string) string {
	fx.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		fx.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (fx *fixture) set(dir, file, content string) {
	fx.t.Helper()
	writeFile(fx.t, filepath.Join(dir, file), content+"\n")
}

// snapshot maps every file below root to its content, for "nothing else changed" checks.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRef(t testing.TB, uid string, qos QOSClass, id string) ContainerRef {
	t.Helper()
	ref, err := NewContainerRef(uid, string(qos), id)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func readTestdata(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
