package hpcc

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// debianExample is HPCC's example input as Debian's hpcc package installs it.
const debianExample = "/usr/share/doc/hpcc/examples/_hpccinf.txt"

func writeInput(t *testing.T, in Input) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := in.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestInputRoundTrip(t *testing.T) {
	in, err := Size(DefaultSizing(16, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	text := writeInput(t, in)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != inputLines {
		t.Fatalf("%d lines, want %d", len(lines), inputLines)
	}
	got, err := ReadInput(strings.NewReader(text))
	if err != nil || got != in {
		t.Fatalf("ReadInput = %+v, %v; want %+v", got, err, in)
	}
}

// TestInputLinesFitHPCCsBuffer: HPCC reads its input through an 82-byte buffer, so no line
// may pass 80 bytes, whatever the sizing (a real 16-rank run with an 84-byte note misread
// PTRANS's block size and was killed for memory).
func TestInputLinesFitHPCCsBuffer(t *testing.T) {
	for _, s := range []Sizing{
		DefaultSizing(16, 1<<30), DefaultSizing(1_000_000, 1<<50), DefaultSizing(999_983, 1023<<20),
		{Tasks: 999_983, MemoryPerTask: 1023 << 20, MemoryFraction: 0.123456789, MaxGFLOPPerTask: 1.23456789e-300, NB: 4096},
		{Tasks: 999_983, N: maxN, NB: maxNB},
	} {
		in, err := Size(s)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(strings.TrimSuffix(writeInput(t, in), "\n"), "\n") {
			if len(l) > maxLineBytes {
				t.Errorf("%+v: line %d is %d bytes: %q", s, i+1, len(l), l)
			}
		}
	}
}

// TestFixtureInputIsSizes: the input of the real run in testdata is what Size writes for 2 tasks
// of 16 MiB, so the fixture's provenance stays true.
func TestFixtureInputIsSized(t *testing.T) {
	in, err := Size(DefaultSizing(2, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(readFixture(t, "testdata/hpccinf-np2.txt")), writeInput(t, in); got != want {
		t.Errorf("testdata/hpccinf-np2.txt differs from what Size writes for 2 tasks × 16Mi:\n%s\nwant:\n%s", got, want)
	}
}

// TestInputMatchesHPCCExample: every value finegrain does not set is the example input's, read
// the way HPL reads it (the leading words of each line), and ReadInput reads the example.
func TestInputMatchesHPCCExample(t *testing.T) {
	data, err := os.ReadFile(debianExample)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is absent (apt-get install -y hpcc installs it): the comparison with HPCC's example input is skipped", debianExample)
	}
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ReadInput(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("read %s: %v", debianExample, err)
	}
	if ex.N != 1000 || ex.NB != 80 || ex.Grid != (Grid{2, 2}) {
		t.Errorf("read %s as %+v, want N 1000, NB 80, grid 2×2", debianExample, ex)
	}
	ours := strings.Split(writeInput(t, Input{N: ex.N, NB: ex.NB, Grid: ex.Grid, Note: "note"}), "\n")
	theirs := strings.Split(string(data), "\n")
	values := func(line string, n int) string {
		w := strings.Fields(line)
		return strings.Join(w[:min(n, len(w))], " ")
	}
	for i := 2; i < inputLines; i++ {
		if i == 31 { // the separator line: free text
			continue
		}
		n := 1
		if i == 33 || i == 35 { // PTRANS's value lists
			n = len(strings.Fields(strings.Split(theirs[i], "\t")[0]))
		}
		if a, b := values(ours[i], n), values(theirs[i], n); a != b {
			t.Errorf("line %d: value %q, HPCC's example has %q", i+1, a, b)
		}
	}
}

func TestReadInputErrors(t *testing.T) {
	good := writeInput(t, Input{N: 1000, NB: 80, Grid: Grid{1, 2}, Note: "n"})
	lines := strings.Split(good, "\n")
	with := func(line int, text string) string {
		l := append([]string(nil), lines...)
		l[line-1] = text
		return strings.Join(l, "\n")
	}
	for _, tt := range []struct{ name, in, want string }{
		{"short", strings.Join(lines[:20], "\n"), "20 lines: an hpccinf.txt has 36"},
		{"two sizes", with(5, "2   number of problem sizes"), "line 5: 2 in number of problem sizes; finegrain reads inputs with one"},
		{"bad N", with(6, "big  Ns"), `line 6 (Ns): "big" is not a positive integer`},
		{"zero Q", with(12, "0  Qs"), `line 12 (Qs): "0" is not a positive integer`},
		{"empty NB", with(8, ""), "line 8 (NBs) is empty"},
		{"long line", with(2, strings.Repeat("x", 81)), "line 2 is 81 bytes: HPCC reads lines through an 82-byte buffer"},
	} {
		if _, err := ReadInput(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	if _, err := (Input{N: 10, NB: 80, Grid: Grid{1, 1}, Note: "two\nlines"}).WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("WriteTo accepted a note of two lines")
	}
}
