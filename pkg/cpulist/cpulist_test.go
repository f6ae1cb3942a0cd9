package cpulist

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"":            "",
		"\n":          "",
		"  \t":        "",
		"0-3,8":       "0-3,8",
		"0-3,8\n":     "0-3,8",
		" 0-3\n":      "0-3",
		" 0-3,8 ":     "0-3,8",
		"5,1-2":       "1-2,5",
		"0-3,2-5,5":   "0-5",
		"1-1":         "1",
		"007":         "7",
		"16383":       "16383",
		"0-16383":     "0-16383",
		"12,14-15\n":  "12,14-15",
		"0-8191,8192": "0-8192",
	} {
		got, err := Parse(in)
		if err != nil || got.String() != want {
			t.Errorf("Parse(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for in, want := range map[string]string{
		"a":              `"a" is not a CPU number`,
		"1-":             `"" is not a CPU number`,
		"-1":             `"" is not a CPU number`,
		"3-1":            `range "3-1" runs backwards`,
		"16384":          "CPU number 16384 is out of range 0-16383",
		"0-16384":        "CPU number 16384 is out of range 0-16383",
		"0-4000000000":   "out of range",
		"99999999999":    "out of range",
		"99999999999x":   "not a CPU number",
		"0-16383,0-1":    "names more than 16384 CPUs",
		"0-8000,0-10000": "names more than 16384 CPUs",
		"1,,2":           `"" is not a CPU number`,
		"1,":             "ends with a comma",
		",":              `"" is not a CPU number`,
		"0x1":            "not a CPU number",
		"1 - 2":          "not a CPU number",
		"1, 2":           `" 2" is not a CPU number`,
		"+1":             "not a CPU number",
		"1-2-3":          `"2-3" is not a CPU number`,
		"18-35x\n":       `"35x" is not a CPU number`,
		"\u0661":         "not a CPU number",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error %v, want one containing %q", in, err, want)
		}
		if _, err := Count(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Count(%q) error %v, want one containing %q", in, err, want)
		}
	}
}

func TestCount(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0-3,8": 5, "7": 1, "8,0-3": 5, "0-3,2-5,5": 6, " 0-17\n": 18, "0-16383": 16384} {
		if got, err := Count(in); err != nil || got != want {
			t.Errorf("Count(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestCountDoesNotAllocate(t *testing.T) {
	for _, in := range []string{"0-17,36-53", "36-53,0-17,4"} {
		if n := testing.AllocsPerRun(100, func() { _, _ = Count(in) }); n != 0 {
			t.Errorf("Count(%q) allocates %.0f times", in, n)
		}
	}
}

// FuzzParse: whatever the input, Parse and Count agree, stay within the bound, and what Parse
// accepts prints back to a list it reads the same way; cpuset.Parse, which has no bound and no
// whitespace rule, reads an accepted list (trimmed) the same way.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8", "", "\n", "0\n", " 0-3\n", "0-17,36-53", "5-5", "3-1", "1,,2", "1,1", "2,1",
		"0-16384", "0-16383", "0-4294967295", "-1", "+1", " 1", "1-", "-", ",", "0-3,2-5", "12,14-15\n\n", "1,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		n, cerr := Count(s)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Parse(%q) error %v but Count error %v", s, err, cerr)
		}
		if err != nil {
			return
		}
		if n != set.Size() {
			t.Fatalf("Count(%q) = %d, Parse gives %d CPUs", s, n, set.Size())
		}
		if set.Size() > MaxID+1 || (set.Size() > 0 && set.List()[set.Size()-1] > MaxID) {
			t.Fatalf("Parse(%q) = %s, beyond the bound", s, set)
		}
		again, err := Parse(set.String())
		if err != nil || !again.Equals(set) {
			t.Fatalf("Parse(%q) = %s, which does not parse back (%v)", s, set, err)
		}
		lenient, err := cpuset.Parse(strings.TrimSpace(s))
		if err != nil || !lenient.Equals(set) {
			t.Fatalf("Parse(%q) = %s but cpuset.Parse gives %s (%v)", s, set, lenient, err)
		}
	})
}

func BenchmarkCount(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Count("0-17,36-53")
	}
}

// A reader that knows how many CPUs a list can name (its node's capacity) refuses a longer one
// with a typed error, before building anything for the item that goes past the bound.
func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		list  string
		bound int
		ok    bool
	}{
		{"0-7", 8, true},
		{"0-3,8-11", 8, true},
		{"0-8", 8, false},
		{"0-3,0-3,0", 8, false}, // overlapping items count each time they are named
		{"", 0, true},
		{"0", 0, false},
		{"0-16383", 1 << 30, true}, // a bound above MaxCPUs is MaxCPUs
	} {
		set, perr := ParseWithin(tc.list, tc.bound)
		n, cerr := CountWithin(tc.list, tc.bound)
		if tc.ok {
			if perr != nil || cerr != nil || set.Size() != n {
				t.Errorf("%q within %d: Parse %v (%v), Count %d (%v)", tc.list, tc.bound, set, perr, n, cerr)
			}
			continue
		}
		var pe, ce *TooManyError
		if !errors.As(perr, &pe) || !errors.As(cerr, &ce) || pe.Max != tc.bound || ce.Max != tc.bound {
			t.Errorf("%q within %d: errors %v, %v; want TooManyError{%d}", tc.list, tc.bound, perr, cerr, tc.bound)
		}
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = ParseWithin("0-16383", 64) }); allocs > 2 {
		t.Errorf("ParseWithin allocated %.0f times for a list past its bound", allocs)
	}
}
