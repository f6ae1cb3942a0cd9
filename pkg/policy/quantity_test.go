package policy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCPUCount(t *testing.T) {
	for in, want := range map[string]int{"4": 4, "4000m": 4, "1": 1, "64": 64, "2e0": 2, "3000000000n": 3} {
		got, err := CPUCount(resource.MustParse(in))
		if err != nil || got != want {
			t.Errorf("CPUCount(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"1500m":       "not a whole number of CPUs; exclusive cores need an integer request such as 2",
		"0.5":         "not a whole number",
		"999999999n":  "not a whole number",
		"1000000001n": "not a whole number",
		"0":           "not positive",
		"-2":          "not positive",
		"2M":          "larger than any machine",
	} {
		if _, err := CPUCount(resource.MustParse(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CPUCount(%s) error %v, want one containing %q", in, err, want)
		}
	}
}
