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
	// CPUs is the entry's CPU list as written (checked: a non-empty cpulist list); Count how many
	// CPUs it names.
	CPUs  string
	Count int
	// podKey is "namespace/pod".
	podKey string
}

// PodKey returns "namespace/pod", the key the placer's pod maps use.
func (e *ScannedPin) PodKey() string { return e.podKey }

// ScanPins reads a pins attribute entry by entry, in order: each well-formed entry with a nil
// error, each malformed one with an error saying what is wrong (and only its Text set), so that a
// reader may skip a bad entry and keep the others. An empty value has no entries; an empty entry
// (";;", a trailing ";") is malformed, since FormatPins never writes one. The entries together
// may name at most cpulist.MaxCPUs CPUs (ScanPinsWithin).
func ScanPins(value string) iter.Seq2[ScannedPin, error] {
	return ScanPinsWithin(value, cpulist.MaxCPUs)
}

// ScanPinsWithin is ScanPins for a reader that knows how many CPUs the zone can have pinned at
// most (MaxCPUs of its node): the entries' CPU lists may name at most bound CPUs together. The
// entry that goes past it yields an error wrapping a *cpulist.TooManyError, and the scan stops
// there: no value makes a reader count more than bound CPUs, however many entries it holds.
func ScanPinsWithin(value string, bound int) iter.Seq2[ScannedPin, error] {
	return func(yield func(ScannedPin, error) bool) {
		if value == "" {
			return
		}
		left := bound
		for text := range strings.SplitSeq(value, pinSeparator) {
			e, err := scanPin(text, left)
			left -= e.Count
			if !yield(e, err) {
				return
			}
			if err != nil && tooMany(err) {
				return
			}
		}
	}
}

// tooMany reports whether err is, or wraps, a *cpulist.TooManyError.
func tooMany(err error) bool {
	var tm *cpulist.TooManyError
	return errors.As(err, &tm)
}

func scanPin(text string, left int) (ScannedPin, error) {
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
	n, err := cpulist.CountWithin(cpus, left)
	if err != nil && tooMany(err) {
		return e, fmt.Errorf("with this entry the pins name more CPUs than the reader allows: %w", err)
	}
	if err != nil || n == 0 {
		return e, fmt.Errorf("CPU list %q is not a non-empty kernel CPU list", cpus)
	}
	e.Namespace, e.Pod, e.Container, e.CPUs, e.Count = names[0], names[1], names[2], cpus, n
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
// with ScanPins. The entries together may name at most cpulist.MaxCPUs CPUs (ParsePinsWithin).
func ParsePins(value string) ([]PinEntry, error) { return ParsePinsWithin(value, cpulist.MaxCPUs) }

// ParsePinsWithin is ParsePins for a reader that knows how many CPUs the zone can have pinned at
// most (ScanPinsWithin): what it builds is bounded by bound, not by the value's length.
func ParsePinsWithin(value string, bound int) ([]PinEntry, error) {
	var pins []PinEntry
	i := 0
	for e, err := range ScanPinsWithin(value, bound) {
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
