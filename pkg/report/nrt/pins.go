package nrt

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/utils/cpuset"
)

// Pin is one pinned container as the pins attribute lists it.
type Pin struct {
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
func FormatPins(pins []Pin) string {
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

// ParsePins reads what FormatPins wrote. An empty value is no pins. A malformed entry fails the
// whole value with an error naming the entry, because a reader must not take a partial list for
// the zone's pins.
func ParsePins(value string) ([]Pin, error) {
	if value == "" {
		return nil, nil
	}
	entries := strings.Split(value, pinSeparator)
	pins := make([]Pin, 0, len(entries))
	for i, e := range entries {
		p, err := parsePin(e)
		if err != nil {
			return nil, fmt.Errorf("pins entry %d (%q): %w", i+1, e, err)
		}
		pins = append(pins, p)
	}
	return pins, nil
}

func parsePin(entry string) (Pin, error) {
	key, cpus, ok := strings.Cut(entry, cpusSeparator)
	if !ok {
		return Pin{}, fmt.Errorf("want namespace/pod/container=cpus")
	}
	parts := strings.Split(key, nameSeparator)
	if len(parts) != 3 {
		return Pin{}, fmt.Errorf("want namespace/pod/container before %q, found %d parts", cpusSeparator, len(parts))
	}
	var names [3]string
	for i, part := range parts {
		n, err := url.PathUnescape(part)
		if err != nil || n == "" {
			return Pin{}, fmt.Errorf("name %q is empty or badly escaped", part)
		}
		names[i] = n
	}
	set, err := cpuset.Parse(cpus)
	if err != nil || set.IsEmpty() {
		return Pin{}, fmt.Errorf("CPU list %q is not a non-empty kernel CPU list", cpus)
	}
	return Pin{Namespace: names[0], Pod: names[1], Container: names[2], CPUs: set}, nil
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
