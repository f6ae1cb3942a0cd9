package cgroup

import (
	"strings"
)

// Runtime is the container runtime that named a container: it decides the container cgroup's
// directory name.
type Runtime string

const (
	// RuntimeContainerd is containerd's CRI plugin ("containerd://" container IDs).
	RuntimeContainerd Runtime = "containerd"
	// RuntimeCRIO is CRI-O ("cri-o://" container IDs).
	RuntimeCRIO Runtime = "cri-o"
)

// QOSClass is a pod's Kubernetes QoS class; it decides the pod cgroup's parent. The values are
// those of the pod's status.qosClass.
type QOSClass string

const (
	Guaranteed QOSClass = "Guaranteed"
	Burstable  QOSClass = "Burstable"
	BestEffort QOSClass = "BestEffort"
)

// PodUID is a validated pod UID as the kubelet uses it in cgroup names: a lowercase canonical
// UUID (API-server pods) or 32 lowercase hex digits (the config hash the kubelet uses as the UID
// of a static pod).
type PodUID string

// ContainerID is a validated container ID with the runtime that issued it.
type ContainerID struct {
	Runtime Runtime
	// ID is the runtime's 64-digit lowercase hex container ID.
	ID string
}

// PodRef names a pod's cgroup.
type PodRef struct {
	UID PodUID
	QOS QOSClass
}

// ContainerRef names a container's cgroup: the pod it belongs to and its container ID.
type ContainerRef struct {
	Pod       PodRef
	Container ContainerID
}

// ParseQOSClass accepts exactly the three values of a pod's status.qosClass.
func ParseQOSClass(s string) (QOSClass, error) {
	switch q := QOSClass(s); q {
	case Guaranteed, Burstable, BestEffort:
		return q, nil
	}
	return "", invalid("QoS class", s, "want Guaranteed, Burstable or BestEffort (the pod's status.qosClass)")
}

// ParsePodUID accepts a lowercase canonical UUID (8-4-4-4-12 hex digits) or a 32-digit
// lowercase hex static-pod hash, and nothing else: no other byte can reach a cgroup path.
func ParsePodUID(s string) (PodUID, error) {
	if isUUID(s) || (len(s) == 32 && isLowerHex(s)) {
		return PodUID(s), nil
	}
	return "", invalid("pod UID", s, "want a lowercase UUID like 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 (metadata.uid)")
}

// ParseContainerID accepts a container ID as the API server reports it in
// status.containerStatuses[].containerID: "containerd://" or "cri-o://" followed by 64 lowercase
// hex digits.
func ParseContainerID(s string) (ContainerID, error) {
	for _, rt := range []Runtime{RuntimeContainerd, RuntimeCRIO} {
		if id, ok := strings.CutPrefix(s, string(rt)+"://"); ok {
			if !isContainerHex(id) {
				return ContainerID{}, invalid("container ID", s, "want 64 lowercase hex digits after the runtime prefix")
			}
			return ContainerID{Runtime: rt, ID: id}, nil
		}
	}
	return ContainerID{}, invalid("container ID", s, `want "containerd://<64 hex>" or "cri-o://<64 hex>" (status.containerStatuses[].containerID)`)
}

// NewContainerRef validates the three API-server fields that locate a container's cgroup.
func NewContainerRef(podUID, qosClass, containerID string) (ContainerRef, error) {
	uid, err := ParsePodUID(podUID)
	if err != nil {
		return ContainerRef{}, err
	}
	qos, err := ParseQOSClass(qosClass)
	if err != nil {
		return ContainerRef{}, err
	}
	id, err := ParseContainerID(containerID)
	if err != nil {
		return ContainerRef{}, err
	}
	return ContainerRef{Pod: PodRef{UID: uid, QOS: qos}, Container: id}, nil
}

// String prints the ID in the API server's form, e.g. "containerd://<hex>".
func (c ContainerID) String() string { return string(c.Runtime) + "://" + c.ID }

// String prints "<pod UID>/<container ID>" for logs and errors.
func (r ContainerRef) String() string { return string(r.Pod.UID) + "/" + r.Container.String() }

// Validate re-checks a PodRef built as a literal.
func (p PodRef) Validate() error {
	if _, err := ParsePodUID(string(p.UID)); err != nil {
		return err
	}
	_, err := ParseQOSClass(string(p.QOS))
	return err
}

// Validate re-checks a ContainerID built as a literal.
func (c ContainerID) Validate() error {
	if c.Runtime != RuntimeContainerd && c.Runtime != RuntimeCRIO {
		return invalid("container runtime", string(c.Runtime), "want containerd or cri-o")
	}
	if !isContainerHex(c.ID) {
		return invalid("container ID", c.ID, "want 64 lowercase hex digits")
	}
	return nil
}

// Validate re-checks a ContainerRef built as a literal; every path builder calls it.
func (r ContainerRef) Validate() error {
	if err := r.Pod.Validate(); err != nil {
		return err
	}
	return r.Container.Validate()
}

func isContainerHex(s string) bool { return len(s) == 64 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isUUID reports whether s is a lowercase canonical UUID: 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
