package nrt

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

var cmpSets = cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })

func TestFormatPins(t *testing.T) {
	pins := []PinEntry{
		{Namespace: "hpc", Pod: "lammps-worker-0", Container: "rank", CPUs: cpuset.New(1, 2, 3)},
		{Namespace: "default", Pod: "svc.v2", Container: "main", CPUs: cpuset.New(8, 10)},
	}
	want := "hpc/lammps-worker-0/rank=1-3;default/svc.v2/main=8,10"
	if got := FormatPins(pins); got != want {
		t.Errorf("FormatPins = %q, want %q", got, want)
	}
	back, err := ParsePins(want)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(pins, back, cmpSets); d != "" {
		t.Errorf("ParsePins(FormatPins(pins)) differs (-want +got):\n%s", d)
	}
	if got := FormatPins(nil); got != "" {
		t.Errorf("FormatPins(nil) = %q, want empty", got)
	}
}

func TestFormatPinsEscapesNamesOutsideTheAPICharset(t *testing.T) {
	pins := []PinEntry{{Namespace: "?", Pod: "a/b;c=d%", Container: "x y", CPUs: cpuset.New(4)}}
	got := FormatPins(pins)
	if want := "%3F/a%2Fb%3Bc%3Dd%25/x%20y=4"; got != want {
		t.Errorf("FormatPins = %q, want %q", got, want)
	}
	back, err := ParsePins(got)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(pins, back, cmpSets); d != "" {
		t.Errorf("round trip differs (-want +got):\n%s", d)
	}
}

func TestParsePinsRejectsMalformedEntries(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{"hpc/pod/ctr", "entry 1"},
		{"hpc/pod/ctr=1;hpc/pod=2", "entry 2"},
		{"hpc//ctr=1", "empty"},
		{"hpc/pod/ctr=", "CPU list"},
		{"hpc/pod/ctr=1-x", "CPU list"},
		{"hpc/pod/ctr=1;", "entry 2"},
		{"hpc/p%zz/ctr=1", "badly escaped"},
		{"a/b/c/d=1", "4 parts"},
	} {
		if _, err := ParsePins(tt.value); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePins(%q) = %v, want an error mentioning %q", tt.value, err, tt.want)
		}
	}
}

func FuzzParsePins(f *testing.F) {
	for _, s := range []string{"", "hpc/lammps-worker-0/rank=1-3;default/svc/main=8,10", "%3F/uid/c=4", "a/b/c=", "a/b=1", ";;", "a/b/c=0-2,4,6-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		pins, err := ParsePins(value)
		if err != nil {
			return
		}
		again, err := ParsePins(FormatPins(pins))
		if err != nil {
			t.Fatalf("ParsePins(%q) read %v, whose formatted form %q does not parse: %v", value, pins, FormatPins(pins), err)
		}
		if d := cmp.Diff(pins, again, cmpSets); d != "" {
			t.Fatalf("format/parse round trip of %q differs:\n%s", value, d)
		}
	})
}

// ScanPins reports each entry on its own: a reader can keep the well-formed entries of a
// damaged value, and gets each pod's "namespace/pod" key without an allocation.
func TestScanPins(t *testing.T) {
	type got struct{ Key, Container, CPUs, Err string }
	var out []got
	for e, err := range ScanPins("hpc/a=0-3;hpc/b/main=4-7;;%3F/uid-1/c=8;hpc/c/main=") {
		g := got{Key: e.PodKey(), Container: e.Container, CPUs: e.CPUs}
		if err != nil {
			g = got{Key: e.Text, Err: err.Error()}
		}
		out = append(out, g)
	}
	want := []got{
		{Key: "hpc/a=0-3", Err: `want namespace/pod/container before "=", found 2 parts`},
		{Key: "hpc/b", Container: "main", CPUs: "4-7"},
		{Key: "", Err: "want namespace/pod/container=cpus"},
		{Key: "?/uid-1", Container: "c", CPUs: "8"},
		{Key: "hpc/c/main=", Err: `CPU list "" is not a non-empty kernel CPU list`},
	}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	value := "hpc/lammps-worker-0/rank=1-3;default/svc.v2/main=8,10"
	if n := testing.AllocsPerRun(100, func() {
		for e, err := range ScanPins(value) {
			if err != nil || e.PodKey() == "" {
				t.Fatal(e, err)
			}
		}
	}); n != 0 {
		t.Errorf("reading plain entries allocates %.0f times", n)
	}
}

// Finding 3 of issue 21: the 16-byte pins value "a/b/c=0-16000000" took 1,151 MiB and 32 s in
// ParsePins (the placer's refusal handling, kubectl finegrain). No pins value, however long, now
// makes a reader build more than its bound of CPUs: a list past cpulist.MaxID is refused as it is
// read, and the entries of a value name at most the bound together.
func TestParsePinsHostile(t *testing.T) {
	many := strings.Repeat("a/b/c=0-16383;", 20_000) + "a/b/c=0"
	for _, tc := range []struct {
		name, value string
		bound       int
	}{
		{"one huge range", "a/b/c=0-16000000", cpulist.MaxCPUs},
		{"many full entries", many, cpulist.MaxCPUs},
		{"many full entries on a node of 64 CPUs", many, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := ParsePinsWithin(tc.value, tc.bound)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("a hostile pins value was read")
			}
			if used := after.TotalAlloc - before.TotalAlloc; used > 4<<20 {
				t.Errorf("reading it allocated %d KiB, want at most 4 MiB (%v)", used>>10, err)
			}
			if took > time.Second {
				t.Errorf("reading it took %s", took)
			}
		})
	}
	var tm *cpulist.TooManyError
	if _, err := ParsePinsWithin("a/b/c=0-3;a/b/d=4-8", 8); !errors.As(err, &tm) || tm.Max != 4 {
		t.Errorf("nine CPUs pinned on a node of 8: %v, want a TooManyError for the entry past the bound", err)
	}
}
