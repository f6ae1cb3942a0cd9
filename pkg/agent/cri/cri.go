// Package cri owns asking the node's container runtime, over its CRI socket, who a container is:
// the runtime ID that a new cgroup directory carries tells the agent the pod but not the
// container's name, and only the runtime knows it (and whether the ID is a pod sandbox) before the
// kubelet reports the container to the API server. It is read-only: it must not create, start,
// stop or update anything through the runtime, and it is the only place the agent speaks CRI.
package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/finegrain-dev/finegrain/pkg/cgroup"
)

// ErrNotFound reports an ID the runtime knows neither as a container nor as a pod sandbox (it is
// being created, or it is already gone).
var ErrNotFound = errors.New("the runtime knows no container or sandbox with this ID")

// The labels the kubelet puts on every container it creates through CRI.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// maxMessageSize bounds a CRI reply; a container status is a few kilobytes.
const maxMessageSize = 4 << 20

// Identity is who a container is.
type Identity struct {
	// PodUID is the UID of the pod it belongs to, as the kubelet labelled it.
	PodUID string
	// Name is the container's name in the pod spec; empty for a sandbox.
	Name string
	// Sandbox is true for a pod sandbox (the pause container).
	Sandbox bool
}

// Resolver tells who a container is.
type Resolver interface {
	Resolve(ctx context.Context, id cgroup.ContainerID) (Identity, error)
}

var _ Resolver = (*Client)(nil)

// Client asks a CRI runtime over its socket. It is safe for concurrent use.
type Client struct {
	endpoint, target string
	timeout          time.Duration

	mu   sync.Mutex
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
}

// Dial prepares a client for the CRI endpoint ("unix:///run/containerd/containerd.sock" or a
// socket path); the connection is made on first use. Every Resolve is bounded by timeout.
func Dial(endpoint string, timeout time.Duration) (*Client, error) {
	target := endpoint
	if strings.HasPrefix(endpoint, "/") {
		target = "unix://" + endpoint
	}
	if !strings.HasPrefix(target, "unix://") {
		return nil, fmt.Errorf("CRI endpoint %q: want a unix socket (unix:///path or /path)", endpoint)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("CRI endpoint %q: call timeout %s must be positive", endpoint, timeout)
	}
	c := &Client{endpoint: endpoint, target: target, timeout: timeout}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	c.conn, c.rt = conn, runtimeapi.NewRuntimeServiceClient(conn)
	return c, nil
}

func (c *Client) dial() (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(c.target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize)))
	if err != nil {
		return nil, fmt.Errorf("CRI endpoint %q: %w", c.endpoint, err)
	}
	return conn, nil
}

// Close releases the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn.Close()
}

// runtime returns the current connection's client.
func (c *Client) runtime() runtimeapi.RuntimeServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rt
}

// redial replaces the connection that failed (unless another caller already did) with a fresh
// one and returns its client. A restarted runtime listens on a new socket: a fresh connection
// dials the path again at once, while the failed one would wait out gRPC's reconnect back-off
// (up to two minutes) and fail every call meanwhile.
func (c *Client) redial(failed runtimeapi.RuntimeServiceClient) (runtimeapi.RuntimeServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt != failed {
		return c.rt, nil
	}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	_ = c.conn.Close()
	c.conn, c.rt = conn, runtimeapi.NewRuntimeServiceClient(conn)
	return c.rt, nil
}

// Resolve asks the runtime for the container's status, and for a sandbox's when the ID is not a
// container. An ID the runtime does not know yields an error wrapping ErrNotFound. When the
// runtime is unreachable (restarted, or its socket replaced) the client redials once and asks
// again within the same timeout.
func (c *Client) Resolve(ctx context.Context, id cgroup.ContainerID) (Identity, error) {
	if err := id.Validate(); err != nil {
		return Identity{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rt := c.runtime()
	got, err := c.resolve(ctx, rt, id)
	if status.Code(err) != codes.Unavailable {
		return got, err
	}
	if rt, err = c.redial(rt); err != nil {
		return Identity{}, err
	}
	return c.resolve(ctx, rt, id)
}

func (c *Client) resolve(ctx context.Context, rt runtimeapi.RuntimeServiceClient, id cgroup.ContainerID) (Identity, error) {
	cs, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id.ID})
	if err == nil {
		return containerIdentity(id, cs.GetStatus())
	}
	if status.Code(err) != codes.NotFound {
		return Identity{}, fmt.Errorf("CRI %s: status of container %s: %w", c.endpoint, id, err)
	}
	ss, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id.ID})
	if status.Code(err) == codes.NotFound {
		return Identity{}, fmt.Errorf("CRI %s: container %s: %w", c.endpoint, id, ErrNotFound)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("CRI %s: status of sandbox %s: %w", c.endpoint, id, err)
	}
	uid := ss.GetStatus().GetMetadata().GetUid()
	if uid == "" {
		return Identity{}, fmt.Errorf("CRI %s: sandbox %s has no pod UID in its metadata", c.endpoint, id)
	}
	return Identity{PodUID: uid, Sandbox: true}, nil
}

func containerIdentity(id cgroup.ContainerID, st *runtimeapi.ContainerStatus) (Identity, error) {
	name := st.GetMetadata().GetName()
	if name == "" {
		name = st.GetLabels()[labelContainerName]
	}
	uid := st.GetLabels()[labelPodUID]
	if name == "" || uid == "" {
		return Identity{}, fmt.Errorf("container %s: the runtime's status carries no container name or %s label; it was not created by a kubelet", id, labelPodUID)
	}
	return Identity{PodUID: uid, Name: name}, nil
}
