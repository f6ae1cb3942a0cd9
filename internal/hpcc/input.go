package hpcc

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Input is what finegrain sets in an hpccinf.txt: HPL's matrix order N and block size NB, its
// process grid (P×Q must equal the MPI processes), and a note on line 2 saying how N was chosen.
// Every other line is HPCC's example input's value (inputLines).
type Input struct {
	N, NB int
	Grid  Grid
	Note  string
}

// The layout of hpccinf.txt, by line. HPL reads its part positionally: lines 1 and 2 are free
// text, then one value (or, after a count line, that many values) at the start of each line,
// anything after the values is ignored. HPCC then skips lines 1 to 32 and reads PTRANS's extra
// sizes from lines 33 to 36, all through an 82-byte buffer: a line longer than 80 bytes is read
// as two and shifts every line after it (with 16 ranks, that misread PTRANS's block size and
// HPCC used gigabytes), so every line stays within 80 bytes.
const (
	lineNote      = 2
	lineNCount    = 5
	lineN         = 6
	lineNBCount   = 7
	lineNB        = 8
	lineGridCount = 10
	lineP         = 11
	lineQ         = 12
	inputLines    = 36
	maxLineBytes  = 80
	title         = "hpccinf.txt for HPCC 1.5, written by finegrain (go run ./bench/hpcc inf)"
)

// Validate checks that in can be written as an hpccinf.txt HPL accepts.
func (in Input) Validate() error {
	switch {
	case in.N < 1 || in.N > maxN:
		return fmt.Errorf("HPL N %d: want 1 to %d", in.N, maxN)
	case in.NB < 1 || in.NB > maxNB:
		return fmt.Errorf("HPL block size NB %d: want 1 to %d", in.NB, maxNB)
	case in.Grid.P < 1 || in.Grid.Q < 1:
		return fmt.Errorf("process grid %d×%d: want P and Q of at least 1", in.Grid.P, in.Grid.Q)
	case strings.ContainsAny(in.Note, "\r\n") || len(in.Note) > maxLineBytes:
		return fmt.Errorf("note %q: want one line of at most %d bytes", in.Note, maxLineBytes)
	}
	return nil
}

// WriteTo writes in as an hpccinf.txt (implementing io.WriterTo).
func (in Input) WriteTo(w io.Writer) (int64, error) {
	if err := in.Validate(); err != nil {
		return 0, fmt.Errorf("write hpccinf.txt: %w", err)
	}
	var b bytes.Buffer
	for _, l := range in.lines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.WriteTo(w)
}

// lines is the whole file: HPCC's example input with finegrain's N, NB, P, Q and note, each value
// followed by what it means.
func (in Input) lines() []string {
	v := func(value any, meaning string) string { return fmt.Sprintf("%-12v %s", value, meaning) }
	return []string{
		title,
		in.Note,
		v("HPL.out", "HPL output file (unused: HPCC writes everything to hpccoutf.txt)"),
		v(8, "HPL output device (6 stdout, 7 stderr, else the file above)"),
		v(1, "number of problem sizes"),
		v(in.N, "Ns: HPL matrix order; HPCC sizes its other tests from the matrix"),
		v(1, "number of block sizes"),
		v(in.NB, "NBs: HPL block size"),
		v(0, "PMAP: process mapping (0 row-major, 1 column-major)"),
		v(1, "number of process grids"),
		v(in.Grid.P, "Ps: process rows"),
		v(in.Grid.Q, "Qs: process columns (P x Q = MPI processes)"),
		v("16.0", "threshold: largest scaled residual that passes"),
		v(1, "number of panel factorizations"),
		v(2, "PFACTs (0 left, 1 Crout, 2 right)"),
		v(1, "number of recursion stopping criteria"),
		v(4, "NBMINs: panel width that ends the recursion"),
		v(1, "number of panel splits per recursion"),
		v(2, "NDIVs: subpanels per recursion step"),
		v(1, "number of recursive panel factorizations"),
		v(1, "RFACTs (0 left, 1 Crout, 2 right)"),
		v(1, "number of broadcasts"),
		v(1, "BCASTs (0 1ring, 1 1ringM, 2 2ring, 3 2ringM, 4 long, 5 longM)"),
		v(1, "number of look-ahead depths"),
		v(1, "DEPTHs: look-ahead depth"),
		v(2, "SWAP (0 binary exchange, 1 long, 2 mixed)"),
		v(64, "swapping threshold of the mixed swap"),
		v(0, "L1 form (0 transposed, 1 not transposed)"),
		v(0, "U form (0 transposed, 1 not transposed)"),
		v(1, "equilibration (0 no, 1 yes)"),
		v(8, "memory alignment in doubles"),
		"---- line 32, skipped by HPCC; PTRANS's extra sizes follow ----",
		v(0, "number of extra PTRANS problem sizes"),
		v("1200 10000 30000", "extra PTRANS Ns (unused while their number is 0)"),
		v(0, "number of extra PTRANS block sizes"),
		v("40 9 8 13 13 20 16 32 64", "extra PTRANS NBs (unused while their number is 0)"),
	}
}

// ReadInput reads back the values finegrain sets from an hpccinf.txt with one problem size, one
// block size and one process grid (as WriteTo writes, and as HPCC's example input has). Errors
// give the line; the caller names the file.
func ReadInput(r io.Reader) (Input, error) {
	data, err := io.ReadAll(io.LimitReader(r, inputLines*256+1))
	if err != nil {
		return Input{}, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < inputLines {
		return Input{}, fmt.Errorf("%d lines: an hpccinf.txt has %d (HPL's 31, a separator, PTRANS's 4)", len(lines), inputLines)
	}
	for i, l := range lines[:inputLines] {
		if len(l) > maxLineBytes {
			return Input{}, fmt.Errorf("line %d is %d bytes: HPCC reads lines through an 82-byte buffer, so one longer than %d bytes shifts every line after it", i+1, len(l), maxLineBytes)
		}
	}
	field := func(line int, what string) (int, error) {
		words := strings.Fields(lines[line-1])
		if len(words) == 0 {
			return 0, fmt.Errorf("line %d (%s) is empty", line, what)
		}
		x, err := strconv.Atoi(words[0])
		if err != nil || x < 1 {
			return 0, fmt.Errorf("line %d (%s): %q is not a positive integer", line, what, words[0])
		}
		return x, nil
	}
	for _, c := range []struct {
		line int
		what string
	}{{lineNCount, "number of problem sizes"}, {lineNBCount, "number of block sizes"}, {lineGridCount, "number of process grids"}} {
		k, err := field(c.line, c.what)
		if err != nil {
			return Input{}, err
		}
		if k != 1 {
			return Input{}, fmt.Errorf("line %d: %d in %s; finegrain reads inputs with one", c.line, k, c.what)
		}
	}
	in := Input{Note: strings.TrimRight(lines[lineNote-1], " \t\r")}
	for _, f := range []struct {
		dst  *int
		line int
		what string
	}{{&in.N, lineN, "Ns"}, {&in.NB, lineNB, "NBs"}, {&in.Grid.P, lineP, "Ps"}, {&in.Grid.Q, lineQ, "Qs"}} {
		if *f.dst, err = field(f.line, f.what); err != nil {
			return Input{}, err
		}
	}
	return in, in.Validate()
}
