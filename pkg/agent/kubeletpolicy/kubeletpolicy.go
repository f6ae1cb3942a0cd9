// Package kubeletpolicy owns detecting a kubelet whose CPU manager pins containers itself (the
// static policy), which the node agent must never fight: both would rewrite the same cpusets. It
// asks the kubelet's pod-resources API (GetAllocatableResources on the socket below the kubelet's
// root directory, pod-resources/kubelet.sock): a CPU manager that hands out exclusive CPUs reports
// the CPUs it may give, the none policy reports none. The agent so needs only that socket's
// directory, not the kubelet's root directory (the kubelet's client credentials and every pod's
// volumes live there), and no API-server right (the kubelet's configz would need the broad
// nodes/proxy). It must not write anything, and it asks for nothing but the allocatable CPUs.
package kubeletpolicy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// SocketDir and Socket locate the kubelet's pod-resources socket below its root directory.
const (
	SocketDir = "pod-resources"
	Socket    = "kubelet.sock"
)

// Policies the agent tells apart.
const (
	// PolicyNone: the kubelet's CPU manager gives no container exclusive CPUs.
	PolicyNone = "none"
	// PolicyStatic: it does (the static policy), and writes containers' cpusets itself.
	PolicyStatic = "static"
)

// getAllocatable is the pod-resources API's method (k8s.io/kubelet/pkg/apis/podresources/v1).
const getAllocatable = "/v1.PodResourcesLister/GetAllocatableResources"

// maxReply bounds the reply: the allocatable CPUs, devices and memory of one node.
const maxReply = 4 << 20

// Result is what the kubelet says.
type Result struct {
	// Socket is the pod-resources socket asked.
	Socket string
	// Policy is PolicyStatic when the kubelet reports CPUs it may give exclusively, else
	// PolicyNone.
	Policy string
	// CPUs is how many CPUs it may give.
	CPUs int
}

// Static reports whether the kubelet pins containers itself.
func (r Result) Static() bool { return r.Policy == PolicyStatic }

// Client asks one kubelet. It is safe for concurrent use.
type Client struct {
	socket  string
	timeout time.Duration

	mu   sync.Mutex
	conn *grpc.ClientConn
}

// Dial prepares a client for the pod-resources socket below the kubelet's root directory; the
// connection is made on first use, and every Check is bounded by timeout.
func Dial(kubeletRootDir string, timeout time.Duration) (*Client, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("kubelet pod-resources API: call timeout %s must be positive", timeout)
	}
	c := &Client{socket: filepath.Join(kubeletRootDir, SocketDir, Socket), timeout: timeout}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

func (c *Client) dial() (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+c.socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReply), grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources API %s: %w", c.socket, err)
	}
	return conn, nil
}

// Close releases the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn.Close()
}

// Check asks the kubelet for its allocatable CPUs. A kubelet that does not answer is an error
// naming the socket. A restarted kubelet makes a new socket: a failed call is tried once more on
// a fresh connection, which dials the path again at once.
func (c *Client) Check(ctx context.Context) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	var reply []byte
	err := conn.Invoke(ctx, getAllocatable, []byte{}, &reply)
	if err != nil && ctx.Err() == nil {
		if conn, err = c.redial(conn); err == nil {
			err = conn.Invoke(ctx, getAllocatable, []byte{}, &reply)
		}
	}
	if err != nil {
		return Result{Socket: c.socket}, fmt.Errorf("ask the kubelet's pod-resources API (%s) for its allocatable CPUs: %w", c.socket, err)
	}
	n, err := CountCPUs(reply)
	if err != nil {
		return Result{Socket: c.socket}, fmt.Errorf("kubelet pod-resources API %s: %w", c.socket, err)
	}
	res := Result{Socket: c.socket, Policy: PolicyNone, CPUs: n}
	if n > 0 {
		res.Policy = PolicyStatic
	}
	return res, nil
}

// redial replaces the connection that failed (unless another caller already did).
func (c *Client) redial(failed *grpc.ClientConn) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != failed {
		return c.conn, nil
	}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	_ = c.conn.Close()
	c.conn = conn
	return conn, nil
}

// cpuIDsField is AllocatableResourcesResponse.cpu_ids (repeated int64, packed or not).
const cpuIDsField protowire.Number = 2

// CountCPUs reads how many CPU IDs an AllocatableResourcesResponse lists, skipping its other
// fields (devices, memory) unread.
func CountCPUs(msg []byte) (int, error) {
	n := 0
	for len(msg) > 0 {
		num, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return 0, fmt.Errorf("malformed reply: %w", protowire.ParseError(l))
		}
		msg = msg[l:]
		switch {
		case num == cpuIDsField && typ == protowire.VarintType:
			_, l = protowire.ConsumeVarint(msg)
			n++
		case num == cpuIDsField && typ == protowire.BytesType:
			var packed []byte
			packed, l = protowire.ConsumeBytes(msg)
			for l >= 0 && len(packed) > 0 {
				_, vl := protowire.ConsumeVarint(packed)
				if vl < 0 {
					return 0, fmt.Errorf("malformed cpu_ids: %w", protowire.ParseError(vl))
				}
				packed = packed[vl:]
				n++
			}
		default:
			l = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if l < 0 {
			return 0, fmt.Errorf("malformed reply: %w", protowire.ParseError(l))
		}
		msg = msg[l:]
	}
	return n, nil
}

// rawCodec passes protobuf messages through as bytes: the one request (an empty message) is
// written and the one reply read by hand, without the kubelet module's generated types.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("raw codec: can only unmarshal into *[]byte")
	}
	*p = append((*p)[:0], data...)
	return nil
}
