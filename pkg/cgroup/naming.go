package cgroup

import (
	"fmt"
	"path"
	"strings"
)

// Level is how deep in the kubepods tree a cgroup directory sits.
type Level int

const (
	LevelKubepods Level = iota + 1
	// LevelQOS is the burstable or besteffort directory (Guaranteed pods sit in kubepods).
	LevelQOS
	LevelPod
	LevelContainer
)

// Location is what a kubepods cgroup directory says about itself.
type Location struct {
	Level Level
	// QOS is set from LevelQOS down; Guaranteed for pods directly below kubepods.
	QOS QOSClass
	// Pod is set for LevelPod and LevelContainer.
	Pod PodUID
	// Container is set for LevelContainer.
	Container ContainerID
}

// ContainerRef returns the container a LevelContainer location names.
func (l Location) ContainerRef() (ContainerRef, bool) {
	if l.Level != LevelContainer {
		return ContainerRef{}, false
	}
	return ContainerRef{Pod: PodRef{UID: l.Pod, QOS: l.QOS}, Container: l.Container}, true
}

// The kubelet's names for its top-level and QoS cgroups.
const (
	kubepodsName     = "kubepods"
	burstableName    = "burstable"
	besteffortName   = "besteffort"
	sliceSuffix      = ".slice"
	scopeSuffix      = ".scope"
	containerdPrefix = "cri-containerd-"
	crioPrefix       = "crio-"
)

func (d Driver) kubepods() string {
	if d == Systemd {
		return kubepodsName + sliceSuffix
	}
	return kubepodsName
}

// qosName is the QoS directory's name below kubepods, empty for Guaranteed.
func (d Driver) qosName(q QOSClass) string {
	var n string
	switch q {
	case Burstable:
		n = burstableName
	case BestEffort:
		n = besteffortName
	default:
		return ""
	}
	if d == Systemd {
		return kubepodsName + "-" + n + sliceSuffix
	}
	return n
}

// podName is the pod directory's name. systemd slice names use "-" as the hierarchy separator,
// so the kubelet writes the UID's dashes as underscores.
func (d Driver) podName(p PodRef) string {
	if d != Systemd {
		return "pod" + string(p.UID)
	}
	prefix := kubepodsName + "-"
	if p.QOS != Guaranteed {
		prefix += strings.ToLower(string(p.QOS)) + "-"
	}
	return prefix + "pod" + strings.ReplaceAll(string(p.UID), "-", "_") + sliceSuffix
}

// containerName is the container directory's name as containerd's and CRI-O's runc
// configuration produce it for each driver.
func (d Driver) containerName(c ContainerID) string {
	switch {
	case d == Systemd && c.Runtime == RuntimeCRIO:
		return crioPrefix + c.ID + scopeSuffix
	case d == Systemd:
		return containerdPrefix + c.ID + scopeSuffix
	case c.Runtime == RuntimeCRIO:
		return crioPrefix + c.ID
	}
	return c.ID
}

// podParts returns the path components from kubepods down to the pod.
func (d Driver) podParts(p PodRef) []string {
	parts := []string{d.kubepods()}
	if q := d.qosName(p.QOS); q != "" {
		parts = append(parts, q)
	}
	return append(parts, d.podName(p))
}

func (d Driver) containerParts(r ContainerRef) []string {
	return append(d.podParts(r.Pod), d.containerName(r.Container))
}

func (d Driver) podPath(p PodRef) string { return path.Join(d.podParts(p)...) }

func (d Driver) containerPath(r ContainerRef) string { return path.Join(d.containerParts(r)...) }

// ParseRelPath parses a cgroup path relative to the layout's base (e.g.
// "kubepods/burstable/pod<uid>/<id>") into the kubelet object it names. It accepts only the exact
// names the kubelet and the runtimes produce for driver d: every accepted path is rebuilt from
// the parsed identifiers and must match byte for byte.
func ParseRelPath(d Driver, rel string) (Location, error) {
	if _, err := ParseDriver(string(d)); err != nil {
		return Location{}, err
	}
	loc, err := parseRelPath(d, rel)
	if err != nil {
		return Location{}, err
	}
	if rebuilt := loc.relPath(d); rebuilt != rel {
		return Location{}, unrecognized(d, rel, "not the kubelet's spelling")
	}
	return loc, nil
}

func parseRelPath(d Driver, rel string) (Location, error) {
	parts := strings.Split(rel, "/")
	if parts[0] != d.kubepods() {
		return Location{}, unrecognized(d, rel, "not below "+d.kubepods())
	}
	if len(parts) == 1 {
		return Location{Level: LevelKubepods}, nil
	}
	loc := Location{Level: LevelQOS, QOS: Guaranteed}
	i := 1
	for _, q := range []QOSClass{Burstable, BestEffort} {
		if parts[1] == d.qosName(q) {
			loc.QOS, i = q, 2
		}
	}
	if i == len(parts) {
		return loc, nil
	}
	uid, err := d.parsePodName(loc.QOS, parts[i])
	if err != nil {
		return Location{}, unrecognized(d, rel, err.Error())
	}
	loc.Level, loc.Pod = LevelPod, uid
	if i+1 == len(parts) {
		return loc, nil
	}
	id, err := d.parseContainerName(parts[i+1])
	if err != nil {
		return Location{}, unrecognized(d, rel, err.Error())
	}
	if i+2 != len(parts) {
		return Location{}, unrecognized(d, rel, "below a container cgroup")
	}
	loc.Level, loc.Container = LevelContainer, id
	return loc, nil
}

func (d Driver) parsePodName(q QOSClass, name string) (PodUID, error) {
	prefix, suffix := "pod", ""
	if d == Systemd {
		prefix, suffix = strings.TrimSuffix(d.podName(PodRef{QOS: q}), sliceSuffix), sliceSuffix
	}
	s, hasPrefix := strings.CutPrefix(name, prefix)
	s, hasSuffix := strings.CutSuffix(s, suffix)
	if !hasPrefix || !hasSuffix {
		return "", fmt.Errorf("component %q is not a pod cgroup", truncate(name))
	}
	if d == Systemd {
		s = strings.ReplaceAll(s, "_", "-")
	}
	return ParsePodUID(s)
}

func (d Driver) parseContainerName(name string) (ContainerID, error) {
	if d == Systemd {
		s, ok := strings.CutSuffix(name, scopeSuffix)
		if !ok {
			return ContainerID{}, fmt.Errorf("component %q is not a container scope", truncate(name))
		}
		name = s
		if id, ok := strings.CutPrefix(name, containerdPrefix); ok && isContainerHex(id) {
			return ContainerID{Runtime: RuntimeContainerd, ID: id}, nil
		}
	} else if isContainerHex(name) {
		return ContainerID{Runtime: RuntimeContainerd, ID: name}, nil
	}
	if id, ok := strings.CutPrefix(name, crioPrefix); ok && isContainerHex(id) {
		return ContainerID{Runtime: RuntimeCRIO, ID: id}, nil
	}
	return ContainerID{}, fmt.Errorf("component %q is not a containerd or CRI-O container cgroup", truncate(name))
}

// relPath rebuilds the path a location was parsed from.
func (l Location) relPath(d Driver) string {
	parts := []string{d.kubepods()}
	if q := d.qosName(l.QOS); q != "" && l.Level >= LevelQOS {
		parts = append(parts, q)
	}
	if l.Level >= LevelPod {
		parts = append(parts, d.podName(PodRef{UID: l.Pod, QOS: l.QOS}))
	}
	if l.Level == LevelContainer {
		parts = append(parts, d.containerName(l.Container))
	}
	return strings.Join(parts, "/")
}

func unrecognized(d Driver, rel, why string) error {
	return fmt.Errorf("cgroup path %q (%s driver): %s: %w", truncate(rel), d, why, ErrUnrecognized)
}
