package hpcc

import (
	"math"
	"strings"
	"testing"
)

func TestGridFor(t *testing.T) {
	for _, tt := range []struct {
		tasks int
		want  Grid
	}{
		{1, Grid{1, 1}}, {2, Grid{1, 2}}, {3, Grid{1, 3}}, {4, Grid{2, 2}}, {6, Grid{2, 3}},
		{12, Grid{3, 4}}, {13, Grid{1, 13}}, {16, Grid{4, 4}}, {18, Grid{3, 6}}, {36, Grid{6, 6}},
		{96, Grid{8, 12}}, {97, Grid{1, 97}}, {1 << 20, Grid{1024, 1024}}, {1 << 21, Grid{1024, 2048}},
		{999_983, Grid{1, 999_983}}, {1_000_000, Grid{1000, 1000}}, {999_999, Grid{999, 1001}},
	} {
		got, err := GridFor(tt.tasks)
		if err != nil || got != tt.want {
			t.Errorf("GridFor(%d) = %v, %v; want %v", tt.tasks, got, err, tt.want)
		}
	}
	if _, err := GridFor(0); err == nil {
		t.Error("GridFor(0) accepted")
	}
	// Every count up to 5000: P×Q = tasks, P ≤ Q, and no divisor lies between P and √tasks.
	for n := 1; n <= 5000; n++ {
		g, err := GridFor(n)
		if err != nil || g.P*g.Q != n || g.P > g.Q {
			t.Fatalf("GridFor(%d) = %v, %v", n, g, err)
		}
		for d := g.P + 1; d*d <= n; d++ {
			if n%d == 0 {
				t.Fatalf("GridFor(%d) = %v, but %d×%d is squarer", n, g, d, n/d)
			}
		}
	}
}

func TestSize(t *testing.T) {
	const Mi, Gi = 1 << 20, 1 << 30
	for _, tt := range []struct {
		name string
		s    Sizing
		n    int
		grid Grid
		note string
	}{
		{"local one-task job: work cap", DefaultSizing(1, Gi), 2400, Grid{1, 1},
			"1 tasks x 1 GiB: N=2400 by work cap 10 GFLOP/task; matrix 43.9 MiB of 1 GiB"},
		{"paper's 16 tasks: work cap", DefaultSizing(16, Gi), 6160, Grid{4, 4},
			"16 tasks x 1 GiB: N=6160 by work cap 10 GFLOP/task; matrix 290 MiB of 16 GiB"},
		{"small memory: memory bound", DefaultSizing(2, 16*Mi), 1440, Grid{1, 2},
			"2 tasks x 16 MiB: N=1440 by memory fraction 0.5; matrix 15.8 MiB of 32 MiB"},
		{"tiny memory: floor", DefaultSizing(1, 16*Mi), 1040, Grid{1, 1},
			"1 tasks x 16 MiB: N=1040 by floor 1000; matrix 8.25 MiB of 16 MiB"},
		{"no cap: memory fills", Sizing{Tasks: 16, MemoryPerTask: Gi, MemoryFraction: 0.5, NB: 80}, 32720, Grid{4, 4},
			"16 tasks x 1 GiB: N=32720 by memory fraction 0.5; matrix 7.98 GiB of 16 GiB"},
		{"prime count", DefaultSizing(13, 512*Mi), 5760, Grid{1, 13},
			"13 tasks x 512 MiB: N=5760 by work cap 10 GFLOP/task; matrix 253 MiB of 6.5 GiB"},
		{"forced N", Sizing{Tasks: 4, N: 1234, NB: 80}, 1234, Grid{2, 2},
			"4 tasks: N=1234 as given; matrix 11.6 MiB"},
		{"huge job stays a C int", Sizing{Tasks: 1_000_000, MemoryPerTask: 1 << 50, MemoryFraction: 1, NB: 80}, 2147483600, Grid{1000, 1000},
			"N=2147483600 by memory fraction 1"},
		{"long note shortened", Sizing{Tasks: 999_983, MemoryPerTask: 1023 << 20, MemoryFraction: 0.123456789, MaxGFLOPPerTask: 0.987654321, NB: 80}, 113920, Grid{1, 999_983},
			"N=113920 by work cap 0.987654321 GFLOP/task"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, err := Size(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if in.N != tt.n || in.Grid != tt.grid || in.NB != tt.s.NB || (tt.note != "" && in.Note != tt.note) {
				t.Errorf("Size = %+v, want N %d, grid %v, note %q", in, tt.n, tt.grid, tt.note)
			}
		})
	}
}

// TestSizeRules checks the documented rules over many shapes: N is a multiple of NB, its matrix
// fits the memory fraction and its work the cap unless the floor decided, and N is the largest
// such multiple.
func TestSizeRules(t *testing.T) {
	for _, tasks := range []int{1, 2, 3, 7, 16, 64, 1000} {
		for _, mem := range []int64{8 << 20, 64 << 20, 1 << 30, 64 << 30} {
			s := DefaultSizing(tasks, mem)
			in, err := Size(s)
			if err != nil {
				t.Fatal(err)
			}
			fits := func(n int) bool {
				nf := float64(n)
				return 8*nf*nf <= s.MemoryFraction*float64(tasks)*float64(mem) &&
					2*nf*nf*nf/3/float64(tasks) <= s.MaxGFLOPPerTask*1e9*(1+1e-12)
			}
			switch {
			case in.N%s.NB != 0:
				t.Errorf("%d tasks × %d B: N %d is not a multiple of %d", tasks, mem, in.N, s.NB)
			case strings.Contains(in.Note, "floor"):
				if in.N != 1040 || fits(in.N) {
					t.Errorf("%d tasks × %d B: floor N %d, but N %d fits", tasks, mem, in.N, in.N)
				}
			case !fits(in.N) || fits(in.N+s.NB):
				t.Errorf("%d tasks × %d B: N %d is not the largest multiple of %d within the bounds", tasks, mem, in.N, s.NB)
			}
		}
	}
}

func TestSizeRefusesBadSizings(t *testing.T) {
	for _, tt := range []struct {
		s    Sizing
		want string
	}{
		{DefaultSizing(0, 1<<30), "want at least 1 task"},
		{DefaultSizing(4, 0), "memory per task is required"},
		{Sizing{Tasks: 4, MemoryPerTask: 1 << 30, MemoryFraction: 0, NB: 80}, "memory fraction 0"},
		{Sizing{Tasks: 4, MemoryPerTask: 1 << 30, MemoryFraction: 1.5, NB: 80}, "memory fraction 1.5"},
		{Sizing{Tasks: 4, MemoryPerTask: 1 << 30, MemoryFraction: 0.5, MaxGFLOPPerTask: -1, NB: 80}, "work cap -1"},
		{Sizing{Tasks: 4, MemoryPerTask: 1 << 30, MemoryFraction: 0.5, MaxGFLOPPerTask: math.Inf(1), NB: 80}, "work cap +Inf"},
		{Sizing{Tasks: 4, MemoryPerTask: 1 << 30, MemoryFraction: 0.5, NB: 0}, "block size NB 0"},
		{Sizing{Tasks: 4, N: -5, NB: 80}, "HPL N -5"},
		{Sizing{Tasks: 4, N: math.MaxInt32 + 1, NB: 80}, "at most 2147483647"},
	} {
		if _, err := Size(tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Size(%+v) error = %v, want it to contain %q", tt.s, err, tt.want)
		}
	}
}
