package stream

import (
	"os"
	"strings"
	"testing"
)

func TestKernelsRunAndValidate(t *testing.T) {
	s, err := Prepare(200_000)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"copy", "scale", "add", "triad"}
	for i, k := range r.Kernels {
		if k.Name != names[i] {
			t.Errorf("kernel %d is %q, want %q", i, k.Name, names[i])
		}
		if !(k.Min > 0 && k.Min <= k.Avg && k.Avg <= k.Max) || !(k.BestGBs() >= k.AvgGBs()) {
			t.Errorf("%s: implausible times min %v avg %v max %v", k.Name, k.Min, k.Avg, k.Max)
		}
	}
	if r.Triad().Bytes != 3*8*200_000 {
		t.Errorf("triad moves %d bytes per pass, want 3 arrays of 200000 float64", r.Triad().Bytes)
	}
}

func TestValidationCatchesWrongElement(t *testing.T) {
	s, err := Prepare(10_000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(3); err != nil {
		t.Fatal(err)
	}
	s.b[1234] += 1
	err = s.validate(3)
	if err == nil || !strings.Contains(err.Error(), "array b") {
		t.Fatalf("one wrong element in b passed validation: %v", err)
	}
}

func TestRejectsBadParameters(t *testing.T) {
	if _, err := Prepare(10); err == nil {
		t.Error("Prepare accepted 10 elements")
	}
	s, err := Prepare(minLen)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(1); err == nil {
		t.Error("Run accepted a single pass, which STREAM leaves out of its statistics")
	}
}

func TestLastLevelCache(t *testing.T) {
	for _, tc := range []struct {
		root string
		want int64
	}{
		{"testdata/epyc-kvm-2cpu", 32 << 20},  // this machine: one 32 MiB L3 shared by both CPUs
		{"testdata/epyc-2ccx-4cpu", 32 << 20}, // two 16 MiB L3 instances, each counted once
	} {
		got, err := LastLevelCache(tc.root)
		if err != nil {
			t.Fatalf("%s: %v", tc.root, err)
		}
		if got != tc.want {
			t.Errorf("%s: last-level cache %d bytes, want %d", tc.root, got, tc.want)
		}
	}
	n, err := DefaultLen("testdata/epyc-2ccx-4cpu")
	if err != nil || n != 4*(32<<20)/8 {
		t.Errorf("DefaultLen = %d, %v; want four times 32 MiB of float64", n, err)
	}
}

func TestLastLevelCacheBadInput(t *testing.T) {
	_, err := LastLevelCache("testdata/bad-size")
	if err == nil || !strings.Contains(err.Error(), "index0/size") || !strings.Contains(err.Error(), `"lots"`) {
		t.Errorf("got %v, want an error naming the size file and its content", err)
	}
	_, err = LastLevelCache(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "give the array size explicitly") {
		t.Errorf("got %v, want an error telling to give the size", err)
	}
}

func TestLastLevelCacheOfThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/cpu0/cache"); err != nil {
		t.Skipf("no cache information in this machine's sysfs: %v", err)
	}
	got, err := LastLevelCache("/sys")
	if err != nil || got <= 0 {
		t.Fatalf("LastLevelCache(/sys) = %d, %v", got, err)
	}
	t.Logf("last-level cache here: %d MiB", got>>20)
}

func BenchmarkTriad(b *testing.B) {
	s, err := Prepare(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(3 * 8 << 20)
	for b.Loop() {
		triadKernel(s.a, s.b, s.c)
	}
}
