package nrt

import (
	"errors"
	"fmt"
	"iter"
	"net/url"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// PinEntry is one pinned container as the pins attribute lists it, its CPUs parsed: what the node
// agent writes (FormatPins) and what a strict reader gets back (ParsePins). It is the published
// form of a report.Pin, the agent's own pin: the pod by name only (a pod the agent cannot name by
// its UID, in namespace "?"), no memory nodes, and no NUMA node (the zone listing it says that).
type PinEntry struct {
	Namespace, Pod, Container string
	CPUs                      cpuset.CPUSet
}

// Separators of the pins attribute: "ns/pod/ctr=1-3;ns2/pod2/ctr=8".
const (
	pinSeparator  = ";"
	nameSeparator = "/"
	cpusSeparator = "="
)

// FormatPins writes pins as "namespace/pod/container=cpus" entries joined by ";", in the order
// given. Names the API server accepts (DNS labels and subdomains) are written as they are; any
// other byte outside [A-Za-z0-9._-] is percent-encoded, so no name can break the format.
func FormatPins(pins []PinEntry) string {
	var b strings.Builder
	for i, p := range pins {
		if i > 0 {
			b.WriteString(pinSeparator)
		}
		b.WriteString(escapeName(p.Namespace))
		b.WriteString(nameSeparator)
		b.WriteString(escapeName(p.Pod))
		b.WriteString(nameSeparator)
		b.WriteString(escapeName(p.Container))
		b.WriteString(cpusSeparator)
		b.WriteString(p.CPUs.String())
	}
	return b.String()
}

// ScannedPin is one entry of a pins attribute as ScanPins reads it, without expanding its CPU
// list. Its names are unescaped; when neither the namespace nor the pod needed escaping (names
// the API server accepts never do) they, and PodKey, are substrings of the attribute's value, so
// reading an entry allocates nothing.
type ScannedPin struct {
	// Text is the entry as written.
	Text                      string
	Namespace, Pod, Container string
	// CPUs is the entry's CPU list as written (checked: a non-empty cpulist list).
	CPUs string
	// podKey is "namespace/pod".
	podKey string
}

// PodKey returns "namespace/pod", the key the placer's pod maps use.
func (e *ScannedPin) PodKey() string { return e.podKey }

// ScanPins reads a pins attribute entry by entry, in order: each well-formed entry with a nil
// error, each malformed one with an error saying what is wrong (and only its Text set), so that a
// reader may skip a bad entry and keep the others. An empty value has no entries; an empty entry
// (";;", a trailing ";") is malformed, since FormatPins never writes one.
func ScanPins(value string) iter.Seq2[ScannedPin, error] {
	return func(yield func(ScannedPin, error) bool) {
		if value == "" {
			return
		}
		for text := range strings.SplitSeq(value, pinSeparator) {
			e, err := scanPin(text)
			if !yield(e, err) {
				return
			}
		}
	}
}

func scanPin(text string) (ScannedPin, error) {
	e := ScannedPin{Text: text}
	key, cpus, ok := strings.Cut(text, cpusSeparator)
	if !ok {
		return e, errors.New("want namespace/pod/container=cpus")
	}
	ns, rest, _ := strings.Cut(key, nameSeparator)
	pod, ctr, _ := strings.Cut(rest, nameSeparator)
	if parts := strings.Count(key, nameSeparator) + 1; parts != 3 {
		return e, fmt.Errorf("want namespace/pod/container before %q, found %d parts", cpusSeparator, parts)
	}
	var names [3]string
	for i, part := range [3]string{ns, pod, ctr} {
		n, err := url.PathUnescape(part)
		if err != nil || n == "" {
			return e, fmt.Errorf("name %q is empty or badly escaped", part)
		}
		names[i] = n
	}
	if n, err := cpulist.Count(cpus); err != nil || n == 0 {
		return e, fmt.Errorf("CPU list %q is not a non-empty kernel CPU list", cpus)
	}
	e.Namespace, e.Pod, e.Container, e.CPUs = names[0], names[1], names[2], cpus
	if e.Namespace == ns && e.Pod == pod {
		e.podKey = key[:len(ns)+len(nameSeparator)+len(pod)]
	} else {
		e.podKey = e.Namespace + nameSeparator + e.Pod
	}
	return e, nil
}

// ParsePins reads what FormatPins wrote. An empty value is no pins. A malformed entry fails the
// whole value with an error naming the entry, for a reader that must not take a partial list for
// the zone's pins; a reader that can use the well-formed entries of a damaged value reads them
// with ScanPins.
func ParsePins(value string) ([]PinEntry, error) {
	var pins []PinEntry
	i := 0
	for e, err := range ScanPins(value) {
		i++
		if err != nil {
			return nil, fmt.Errorf("pins entry %d (%q): %w", i, e.Text, err)
		}
		// ScanPins checked the list.
		pins = append(pins, PinEntry{Namespace: e.Namespace, Pod: e.Pod, Container: e.Container, CPUs: cpulist.MustParse(e.CPUs)})
	}
	return pins, nil
}

func escapeName(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; nameByte(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
