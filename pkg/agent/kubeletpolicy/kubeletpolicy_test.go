package kubeletpolicy

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// allocatable is an AllocatableResourcesResponse as kubelet 1.33 writes it: a device (field 1),
// the allocatable CPUs (field 2, packed) and memory (field 3).
func allocatable(cpus ...uint64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("\n\x0eexample.com/nic"))
	if len(cpus) > 0 {
		var packed []byte
		for _, c := range cpus {
			packed = protowire.AppendVarint(packed, c)
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("\n\x06memory"))
	return b
}

func TestCountCPUs(t *testing.T) {
	unpacked := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 7)
	unpacked = protowire.AppendVarint(protowire.AppendTag(unpacked, 2, protowire.VarintType), 9)
	for _, tc := range []struct {
		name string
		msg  []byte
		want int
		bad  bool
	}{
		{"none policy", allocatable(), 0, false},
		{"static policy", allocatable(1, 2, 3, 5), 4, false},
		{"unpacked", unpacked, 2, false},
		{"empty", nil, 0, false},
		{"truncated", allocatable(1, 2, 3)[:20], 0, true},
	} {
		got, err := CountCPUs(tc.msg)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%s: %d, %v; want %d (error %v)", tc.name, got, err, tc.want, tc.bad)
		}
	}
}

// kubelet serves GetAllocatableResources on root/pod-resources/kubelet.sock.
func kubelet(t *testing.T, root string, reply []byte) *grpc.Server {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, SocketDir), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(root, SocketDir, Socket))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "v1.PodResourcesLister",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "GetAllocatableResources",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req []byte
				if err := dec(&req); err != nil {
					return nil, err
				}
				return reply, nil
			}}},
	}, struct{}{})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return s
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  []byte
		static bool
	}{
		{"none", allocatable(), false},
		{"static", allocatable(1, 2, 3), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			kubelet(t, root, tc.reply)
			c, err := Dial(root, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res, err := c.Check(context.Background())
			if err != nil || res.Static() != tc.static || res.Socket != filepath.Join(root, "pod-resources/kubelet.sock") {
				t.Errorf("Check = %+v, %v; want static %v", res, err, tc.static)
			}
		})
	}
}

// A kubelet that is not there is an error naming the socket; a restarted one (a new socket) is
// asked again on a fresh connection.
func TestCheckKubeletRestart(t *testing.T) {
	root := t.TempDir()
	c, err := Dial(root, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Check(context.Background()); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "pod-resources/kubelet.sock")) {
		t.Fatalf("no kubelet: %v, want an error naming the socket", err)
	}
	s := kubelet(t, root, allocatable(4))
	if res, err := c.Check(context.Background()); err != nil || !res.Static() {
		t.Fatalf("first kubelet: %+v, %v", res, err)
	}
	s.Stop()
	_ = os.Remove(filepath.Join(root, SocketDir, Socket))
	kubelet(t, root, allocatable())
	if res, err := c.Check(context.Background()); err != nil || res.Static() {
		t.Errorf("restarted kubelet with the none policy: %+v, %v", res, err)
	}
}
