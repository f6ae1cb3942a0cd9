package inspect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

func intp(i int) *int { return &i }

// lammps is the listing of one node with an MPI worker (two ranks, its sshd and orted, one
// rank bound to a single core by mpirun), a worker whose cgroup vanished, and a pinned
// container whose rank escaped the pin.
func lammps() Processes {
	return Processes{
		Node: "node-a", PerContainer: 1024, PerListing: 4096,
		Containers: []ContainerProcesses{
			{
				Namespace: "hpc", Pod: "lammps-worker-0", PodUID: "u0", Container: "worker", ContainerID: "containerd://aa",
				CPUs: "2-5", Mems: "0", NUMANode: 0, Written: true, Listed: 6,
				Processes: []Process{
					{PID: 4100, Command: "sshd", CPUs: "2-5", Mems: "0"},
					{PID: 4180, Command: "orted", CPUs: "2-5", Mems: "0"},
					{PID: 4242, Command: "lmp", Rank: intp(0), RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "2", Mems: "0"},
					{PID: 4243, Command: "lmp\x1b[2J", Cgroup: "ranks", Rank: intp(1), RankVariable: "OMPI_COMM_WORLD_RANK", CPUs: "3", Mems: "0"},
				},
			},
			{
				Namespace: "hpc", Pod: "lammps-worker-1", PodUID: "u1", Container: "worker", ContainerID: "containerd://bb",
				CPUs: "6-7", Mems: "0", Written: true, Error: "container u1/containerd://bb: cgroup missing (the container exited or is not created yet)",
			},
			{
				Namespace: "hpc", Pod: "escape", PodUID: "u2", Container: "worker", ContainerID: "containerd://cc",
				CPUs: "8-9", Mems: "1", NUMANode: 1, Written: false, Listed: 1,
				Processes: []Process{{PID: 5000, Command: "a.out", Rank: intp(0), RankVariable: "PMI_RANK", CPUs: "0-15", Mems: "0-1",
					Problem: "environment not readable (permission denied)"}},
			},
		},
	}
}

func TestWriteProcessesTable(t *testing.T) {
	var b strings.Builder
	if err := WriteProcessesTable(&b, lammps().Containers); err != nil {
		t.Fatal(err)
	}
	want := `POD                  CONTAINER  PINNED CPUS            PID   RANK  COMMAND  CPUS ALLOWED  MEMORY NODES  NOTE
hpc/lammps-worker-0  worker     2-5                    4100  -     sshd     2-5           0
hpc/lammps-worker-0  worker     2-5                    4180  -     orted    2-5           0
hpc/lammps-worker-0  worker     2-5                    4242  0     lmp      2             0
hpc/lammps-worker-0  worker     2-5                    4243  1     lmp?[2J  3             0             in sub-cgroup ranks
hpc/lammps-worker-0  worker     2-5                    ...                                              2 more processes not shown (exited while read, or past the bound per container)
hpc/lammps-worker-1  worker     6-7                    -     -     -        -             -             not listed: container u1/containerd://bb: cgroup missing (the container exited or is not created yet)
hpc/escape           worker     8-9 (not written yet)  5000  0     a.out    0-15          0-1           CPUs outside the pin; memory nodes outside the pin; [1]
[1] environment not readable (permission denied)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	b.Reset()
	if err := WriteProcessesTable(&b, []ContainerProcesses{{Namespace: "a", Pod: "b", Container: "c", CPUs: "1", Written: true}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.String(), "a/b  c          1            -    -     -        -             -             no processes\n") {
		t.Errorf("empty container:\n%s", b.String())
	}
}

func TestParsePodName(t *testing.T) {
	if got, err := ParsePodName("hpc/lammps-worker-0"); err != nil || got != (types.NamespacedName{Namespace: "hpc", Name: "lammps-worker-0"}) {
		t.Errorf("ParsePodName = %v, %v", got, err)
	}
	for _, bad := range []string{"", "lammps", "/x", "x/", "Hpc/x", "hpc/x/y", "hpc/X", "hpc/../x", strings.Repeat("a", 64) + "/x"} {
		if _, err := ParsePodName(bad); err == nil || !strings.Contains(err.Error(), "pod ") {
			t.Errorf("ParsePodName(%q) = %v, want an error naming it", bad, err)
		}
	}
}

// processServer serves a Processes view through the real server, recording the pods asked for.
type processServer struct {
	mu    sync.Mutex
	asked [][]types.NamespacedName
	// entered receives when a listing starts, which then waits for block to close.
	entered, block chan struct{}
	err            error
}

func (p *processServer) list(pods []types.NamespacedName) (Processes, error) {
	if p.block != nil {
		p.entered <- struct{}{}
		<-p.block
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, pods)
	return lammps(), p.err
}

func newProcessServer(t *testing.T, p *processServer) *Server {
	t.Helper()
	srv, err := New(Config{Gatherer: prometheus.NewRegistry(), Pins: func() Pins { return Pins{Source: SourceAgent} },
		Processes: p.list, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestServerProcesses(t *testing.T) {
	p := &processServer{}
	h := newProcessServer(t, p).Handler()
	code, body := get(t, h, http.MethodGet, PathProcesses+"?pod=hpc/lammps-worker-0&pod=hpc/lammps-worker-1")
	if code != http.StatusOK {
		t.Fatalf("GET /processes = %d %s", code, body)
	}
	got, err := DecodeProcesses([]byte(body), "test")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(lammps(), got); d != "" {
		t.Errorf("/processes differs (-want +got):\n%s", d)
	}
	want := [][]types.NamespacedName{{{Namespace: "hpc", Name: "lammps-worker-0"}, {Namespace: "hpc", Name: "lammps-worker-1"}}}
	if d := cmp.Diff(want, p.asked); d != "" {
		t.Errorf("pods asked (-want +got):\n%s", d)
	}
	for _, tt := range []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, PathProcesses + "?pod=nope", http.StatusBadRequest, `pod "nope": want namespace/name`},
		{http.MethodGet, PathProcesses + "?limit=5", http.StatusBadRequest, `unknown parameter "limit"`},
		{http.MethodPost, PathProcesses, http.StatusMethodNotAllowed, "read-only"},
		{http.MethodDelete, PathProcesses, http.StatusMethodNotAllowed, "read-only"},
		{http.MethodHead, PathProcesses, http.StatusOK, ""},
	} {
		if code, body := get(t, h, tt.method, tt.path); code != tt.code || !strings.Contains(body, tt.body) {
			t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, code, body, tt.code, tt.body)
		}
	}
	p.err = errors.New("the agent has not rebuilt its state yet; try again in a few seconds")
	if code, body := get(t, h, http.MethodGet, PathProcesses); code != http.StatusServiceUnavailable || !strings.Contains(body, "not rebuilt") {
		t.Errorf("failing listing = %d %q, want 503 with the reason", code, body)
	}
	without, err := New(Config{Gatherer: prometheus.NewRegistry(), Pins: func() Pins { return Pins{} }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, without.Handler(), http.MethodGet, PathProcesses); code != http.StatusNotFound {
		t.Errorf("/processes without a lister = %d, want 404", code)
	}
}

func TestServerProcessesOneAtATime(t *testing.T) {
	p := &processServer{entered: make(chan struct{}), block: make(chan struct{})}
	h := newProcessServer(t, p).Handler()
	first := make(chan int)
	go func() {
		code, _ := get(t, h, http.MethodGet, PathProcesses)
		first <- code
	}()
	<-p.entered
	if code, body := get(t, h, http.MethodGet, PathProcesses); code != http.StatusServiceUnavailable || !strings.Contains(body, "another process listing is running") {
		t.Errorf("second listing during the first = %d %q, want 503", code, body)
	}
	close(p.block)
	if code := <-first; code != http.StatusOK {
		t.Errorf("first listing = %d", code)
	}
}

func TestFetchProcesses(t *testing.T) {
	p := &processServer{}
	srv := newProcessServer(t, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	pods := []types.NamespacedName{{Namespace: "hpc", Name: "lammps-worker-0"}}
	for _, u := range []string{base, base + "/", base + PathPins} {
		got, err := FetchProcesses(context.Background(), http.DefaultClient, u, pods)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(lammps(), got); d != "" {
			t.Errorf("FetchProcesses(%s) differs (-want +got):\n%s", u, d)
		}
	}
	if d := cmp.Diff(pods, p.asked[0]); d != "" {
		t.Errorf("pods asked (-want +got):\n%s", d)
	}
	if _, err := FetchProcesses(context.Background(), http.DefaultClient, "127.0.0.1:9720", nil); err == nil || !strings.Contains(err.Error(), "is not a URL") {
		t.Errorf("FetchProcesses without a scheme = %v", err)
	}
	for _, data := range []string{`{"node":"x"}`, `[1]`} {
		if _, err := DecodeProcesses([]byte(data), "file"); err == nil || !strings.Contains(err.Error(), "file") {
			t.Errorf("DecodeProcesses(%s) = %v, want an error naming the source", data, err)
		}
	}
}
