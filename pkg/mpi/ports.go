package mpi

import (
	"fmt"
	"strconv"
	"strings"
)

// PortRange is an inclusive range of TCP ports for the sshd of workers that use their node's
// network, where workers on one node must not share a port.
type PortRange struct {
	First, Last int32
}

// DefaultPortRange lies below Linux's ephemeral ports (32768-60999) and Kubernetes's NodePort
// range (30000-32767), so that neither hands out a port a worker's sshd needs.
var DefaultPortRange = PortRange{First: 20000, Last: 20999}

// ParsePortRange reads "FIRST-LAST" (or one port).
func ParsePortRange(s string) (PortRange, error) {
	first, last, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		last = first
	}
	f, err1 := strconv.ParseInt(strings.TrimSpace(first), 10, 32)
	l, err2 := strconv.ParseInt(strings.TrimSpace(last), 10, 32)
	if err1 != nil || err2 != nil || f < 1 || l > 65535 || f > l {
		return PortRange{}, fmt.Errorf("port range %q: want FIRST-LAST with 1 <= FIRST <= LAST <= 65535, such as 20000-20999", s)
	}
	return PortRange{First: int32(f), Last: int32(l)}, nil
}

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Ports hands out ports from a range for the workers of one plan: a port is free on a node when
// the node's pods do not use it and this Ports has not handed it out on that node before.
type Ports struct {
	r PortRange
	// taken are the ports handed out per node; "" holds those of workers not placed yet.
	taken map[string]map[int32]bool
}

// NewPorts starts handing out ports of r.
func NewPorts(r PortRange) *Ports {
	return &Ports{r: r, taken: map[string]map[int32]bool{}}
}

// Take returns the lowest port of the range free on node, where inUse reports the ports the
// node's pods hold. A worker not placed yet (node "") gets a port handed out nowhere else, so
// that it can join any node its siblings are on; the placer binds it later only where that
// port is free.
func (p *Ports) Take(node string, inUse func(port int32) bool) (int32, error) {
	for port := p.r.First; port <= p.r.Last; port++ {
		if p.taken[node][port] || (inUse != nil && inUse(port)) || (node == "" && p.takenAnywhere(port)) {
			continue
		}
		if p.taken[node] == nil {
			p.taken[node] = map[int32]bool{}
		}
		p.taken[node][port] = true
		return port, nil
	}
	where := "node " + node
	if node == "" {
		where = "the job's workers"
	}
	return 0, fmt.Errorf("no SSH port of %s is free on %s: widen the placer's --ssh-port-range", p.r, where)
}

func (p *Ports) takenAnywhere(port int32) bool {
	for _, ports := range p.taken {
		if ports[port] {
			return true
		}
	}
	return false
}
