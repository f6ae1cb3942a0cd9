package hpcc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The lines HPCC 1.5.0 writes around the summary of a run in hpccoutf.txt (checked against the
// output of Debian's hpcc 1.5.0-3, testdata/), and the first line of its banner.
const (
	BeginSummary = "Begin of Summary section."
	EndSummary   = "End of Summary section."
	banner       = "This is the DARPA/DOE HPC Challenge Benchmark"
)

// MaxInputBytes bounds what Parse reads. One run's hpccoutf.txt is about 20 KB; the bound leaves
// room for a launcher's log with many runs and other output, and keeps a wrong input (a binary,
// an endless pipe) from exhausting memory.
const MaxInputBytes = 64 << 20

// ErrNoSummary is returned (wrapped, with the reason) when the input holds no summary section.
var ErrNoSummary = errors.New("no HPCC summary section")

// Field is one key=value line of a summary section, as written.
type Field struct {
	Key   string
	Value string
}

// Summary is the summary section of one HPCC run: its key=value lines in the order HPCC wrote
// them. Values stay text (HPCC writes numbers, and a few words such as VersionRelease=f); Float
// reads a number.
type Summary struct {
	// Line is the 1-based line of the input on which the section begins.
	Line   int
	Fields []Field
}

// Value returns the text of key and whether the summary has it.
func (s Summary) Value(key string) (string, bool) {
	for _, f := range s.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Float returns key's value as a number.
func (s Summary) Float(key string) (float64, error) {
	v, ok := s.Value(key)
	if !ok {
		return 0, fmt.Errorf("summary section at line %d has no %s", s.Line, key)
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("summary section at line %d: %s=%q is not a number", s.Line, key, v)
	}
	return x, nil
}

// Parse reads every summary section in r, in order. r may be hpccoutf.txt itself (HPCC appends
// one summary per run to it) or any text that contains one, such as a launcher's log that
// printed the file among other output. A marker line may carry a prefix separated by
// whitespace (kubectl logs --timestamps or --prefix); inside a section the last
// whitespace-separated word of every non-blank line must be key=value. At most MaxInputBytes are
// read. Errors give the line they are about; the caller adds which input it was.
func Parse(r io.Reader) ([]Summary, error) {
	return parse(r, MaxInputBytes)
}

// ParseFile is Parse on the named file; its errors name the file.
func ParseFile(path string) ([]Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read HPCC output: %w", err)
	}
	defer f.Close()
	sums, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("read HPCC output %s: %w", path, err)
	}
	return sums, nil
}

func parse(r io.Reader, limit int64) ([]Summary, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("input is larger than %d MiB: give the hpccoutf.txt itself, or the part of the log that holds it", limit>>20)
	}
	var (
		sums       []Summary
		cur        *Summary
		seen       map[string]int // key → line, in the open section
		bannerLine int
	)
	for i, raw := range bytes.Split(data, []byte("\n")) {
		n := i + 1
		line := strings.TrimRight(string(raw), " \t\r")
		switch {
		case isMarker(line, BeginSummary):
			if cur != nil {
				return nil, fmt.Errorf("line %d: a second %q before the summary section of line %d ended: the output of two runs is mixed, or one was cut off", n, BeginSummary, cur.Line)
			}
			cur, seen = &Summary{Line: n}, map[string]int{}
		case isMarker(line, EndSummary):
			if cur == nil {
				return nil, fmt.Errorf("line %d: %q without its beginning: the input starts inside a summary section (was the log cut, e.g. by kubectl logs --tail?)", n, EndSummary)
			}
			if len(cur.Fields) == 0 {
				return nil, fmt.Errorf("line %d: the summary section of line %d is empty", n, cur.Line)
			}
			sums = append(sums, *cur)
			cur = nil
		case cur != nil:
			if err := cur.add(line, n, seen); err != nil {
				return nil, err
			}
		case bannerLine == 0 && strings.Contains(line, banner):
			bannerLine = n
		}
	}
	switch {
	case cur != nil:
		return nil, fmt.Errorf("the summary section of line %d has no %q: the output is cut off (did HPCC crash, or was the log truncated?)", cur.Line, EndSummary)
	case len(sums) == 0 && bannerLine > 0:
		return nil, fmt.Errorf("%w: HPCC started (banner at line %d) but did not finish a run; its last lines say why", ErrNoSummary, bannerLine)
	case len(sums) == 0:
		return nil, fmt.Errorf("%w (no line %q): this is not HPCC's output, or the run did not finish", ErrNoSummary, BeginSummary)
	}
	return sums, nil
}

// isMarker reports whether line is marker, alone or after a whitespace-separated prefix.
func isMarker(line, marker string) bool {
	if !strings.HasSuffix(line, marker) {
		return false
	}
	rest := line[:len(line)-len(marker)]
	return rest == "" || strings.HasSuffix(rest, " ") || strings.HasSuffix(rest, "\t")
}

// add appends the key=value of input line n to s.
func (s *Summary) add(line string, n int, seen map[string]int) error {
	words := strings.Fields(line)
	if len(words) == 0 {
		return nil
	}
	word := words[len(words)-1]
	key, value, ok := strings.Cut(word, "=")
	if !ok || !validKey(key) {
		return fmt.Errorf("line %d: %q inside the summary section of line %d is not key=value", n, line, s.Line)
	}
	if first, dup := seen[key]; dup {
		return fmt.Errorf("line %d: %s appears twice in the summary section of line %d (first on line %d)", n, key, s.Line, first)
	}
	seen[key] = n
	s.Fields = append(s.Fields, Field{Key: key, Value: value})
	return nil
}

// validKey accepts the keys HPCC writes: a letter or underscore, then letters, digits and
// underscores.
func validKey(k string) bool {
	if k == "" || '0' <= k[0] && k[0] <= '9' {
		return false
	}
	for _, c := range []byte(k) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
