package cri

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// fakeRuntime answers ContainerStatus and PodSandboxStatus from maps, over a real gRPC server on
// a unix socket, the way containerd's and CRI-O's CRI services answer.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	containers map[string]*runtimeapi.ContainerStatus
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	delay      time.Duration
}

func (f *fakeRuntime) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if st, ok := f.containers[r.ContainerId]; ok {
		return &runtimeapi.ContainerStatusResponse{Status: st}, nil
	}
	return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", r.ContainerId)
}

func (f *fakeRuntime) PodSandboxStatus(_ context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if st, ok := f.sandboxes[r.PodSandboxId]; ok {
		return &runtimeapi.PodSandboxStatusResponse{Status: st}, nil
	}
	return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: not found", r.PodSandboxId)
}

func serve(t *testing.T, f *fakeRuntime) string {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	serveAt(t, f, sock)
	return sock
}

// serveAt serves f on a new socket at path sock until the returned server stops; stopping it
// removes the socket, as a runtime that exits does.
func serveAt(t *testing.T, f *fakeRuntime, sock string) *grpc.Server {
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return srv
}

var (
	ctrID     = cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: strings.Repeat("a", 64)}
	sandboxID = cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: strings.Repeat("b", 64)}
	unknownID = cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: strings.Repeat("c", 64)}
	badID     = cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: strings.Repeat("d", 64)}
)

const uid = "11111111-2222-3333-4444-555555555555"

func TestResolve(t *testing.T) {
	f := &fakeRuntime{
		containers: map[string]*runtimeapi.ContainerStatus{
			ctrID.ID: {Id: ctrID.ID, Metadata: &runtimeapi.ContainerMetadata{Name: "rank"},
				Labels: map[string]string{labelPodUID: uid, labelContainerName: "rank"}},
			badID.ID: {Id: badID.ID, Metadata: &runtimeapi.ContainerMetadata{Name: "x"}},
		},
		sandboxes: map[string]*runtimeapi.PodSandboxStatus{
			sandboxID.ID: {Id: sandboxID.ID, Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: uid}},
		},
	}
	c, err := Dial(serve(t, f), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	if got, err := c.Resolve(ctx, ctrID); err != nil || got != (Identity{PodUID: uid, Name: "rank"}) {
		t.Errorf("Resolve(container) = %+v, %v", got, err)
	}
	if got, err := c.Resolve(ctx, sandboxID); err != nil || got != (Identity{PodUID: uid, Sandbox: true}) {
		t.Errorf("Resolve(sandbox) = %+v, %v", got, err)
	}
	if _, err := c.Resolve(ctx, unknownID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := c.Resolve(ctx, badID); err == nil || !strings.Contains(err.Error(), labelPodUID) {
		t.Errorf("Resolve(unlabelled) = %v, want an error naming the label", err)
	}
	if _, err := c.Resolve(ctx, cgroup.ContainerID{Runtime: cgroup.RuntimeContainerd, ID: "../x"}); !errors.Is(err, cgroup.ErrInvalidID) {
		t.Errorf("Resolve(invalid ID) = %v, want ErrInvalidID", err)
	}
}

func TestResolveTimeoutAndAbsentRuntime(t *testing.T) {
	f := &fakeRuntime{delay: time.Second}
	c, err := Dial("unix://"+serve(t, f), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Resolve(context.Background(), ctrID); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Resolve(slow runtime) = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("Resolve took %s despite a 50 ms timeout", d)
	}

	absent, err := Dial(filepath.Join(t.TempDir(), "none.sock"), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer absent.Close()
	if _, err := absent.Resolve(context.Background(), ctrID); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(no runtime) = %v, want an unavailability error", err)
	}
}

// TestResolveRedialsAfterRuntimeRestart: the runtime restarts, so its socket at the same path is
// a new one, and the agent asked it something while it was down. The next question is answered
// at once (gRPC's own reconnect would fail every call during its back-off, which grows from a
// second to two minutes while the runtime stays away).
func TestResolveRedialsAfterRuntimeRestart(t *testing.T) {
	f := &fakeRuntime{containers: map[string]*runtimeapi.ContainerStatus{
		ctrID.ID: {Id: ctrID.ID, Metadata: &runtimeapi.ContainerMetadata{Name: "rank"}, Labels: map[string]string{labelPodUID: uid}},
	}}
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	first := serveAt(t, f, sock)
	c, err := Dial(sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Resolve(ctx, ctrID); err != nil {
		t.Fatalf("Resolve before the restart: %v", err)
	}
	first.Stop()
	// Ask until a connection attempt has failed: gRPC then backs off before it dials again.
	for i := 0; ; i++ {
		_, err := c.Resolve(ctx, ctrID)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("Resolve while the runtime is down = %v, want Unavailable", err)
		}
		if strings.Contains(err.Error(), "while dialing") {
			break
		}
		if i == 100 {
			t.Fatalf("no failed dial after %d calls while the runtime is down: %v", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	serveAt(t, f, sock)
	start := time.Now()
	got, err := c.Resolve(ctx, ctrID)
	if err != nil || got != (Identity{PodUID: uid, Name: "rank"}) {
		t.Fatalf("Resolve after the restart = %+v, %v; want the container named", got, err)
	}
	t.Logf("answered %s after the runtime came back", time.Since(start))
}

func TestDialRejects(t *testing.T) {
	for _, ep := range []string{"tcp://127.0.0.1:1", "relative.sock", ""} {
		if _, err := Dial(ep, time.Second); err == nil {
			t.Errorf("Dial(%q) = nil error", ep)
		}
	}
	if _, err := Dial("/run/x.sock", 0); err == nil {
		t.Error("Dial with zero timeout = nil error")
	}
}
