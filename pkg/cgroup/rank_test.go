package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// env joins environment entries the way /proc/<pid>/environ holds them.
func env(entries ...string) string { return strings.Join(entries, "\x00") + "\x00" }

func TestParseRank(t *testing.T) {
	for _, tt := range []struct {
		name    string
		environ string
		limit   int
		want    Rank
		wantErr error
	}{
		{"no rank", env("PATH=/bin", "HOME=/root"), MaxEnvironBytes, Rank{}, nil},
		{"empty", "", MaxEnvironBytes, Rank{}, nil},
		{"Open MPI", env("PATH=/bin", "OMPI_COMM_WORLD_RANK=12", "PMIX_RANK=12"), MaxEnvironBytes, Rank{"OMPI_COMM_WORLD_RANK", 12}, nil},
		{"Open MPI trusted over PMIx wherever it stands", env("PMIX_RANK=3", "PMI_RANK=4", "OMPI_COMM_WORLD_RANK=5"), MaxEnvironBytes, Rank{"OMPI_COMM_WORLD_RANK", 5}, nil},
		{"PMIx", env("PMIX_RANK=7", "PMI_RANK=9"), MaxEnvironBytes, Rank{"PMIX_RANK", 7}, nil},
		{"PMI", env("PMI_SIZE=4", "PMI_RANK=0"), MaxEnvironBytes, Rank{"PMI_RANK", 0}, nil},
		{"last entry without NUL", "HOME=/\x00PMI_RANK=2", MaxEnvironBytes, Rank{"PMI_RANK", 2}, nil},
		{"largest rank", env("PMI_RANK=2147483647"), MaxEnvironBytes, Rank{"PMI_RANK", MaxRank}, nil},
		{"first occurrence wins, as getenv", env("PMI_RANK=1", "PMI_RANK=2"), MaxEnvironBytes, Rank{"PMI_RANK", 1}, nil},
		{"malformed first occurrence hides a later one", env("PMI_RANK=x", "PMI_RANK=2"), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"malformed falls back to a valid one", env("OMPI_COMM_WORLD_RANK=", "PMIX_RANK=4"), MaxEnvironBytes, Rank{"PMIX_RANK", 4}, nil},
		{"sign", env("PMI_RANK=+1"), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"negative", env("PMI_RANK=-1"), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"leading zero", env("PMI_RANK=01"), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"too large", env("PMI_RANK=2147483648"), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"space", env("PMI_RANK= 1"), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"longer than the buffer", env("PMI_RANK=1" + strings.Repeat("0", 2*environBuffer)), MaxEnvironBytes, Rank{}, ErrMalformedRank},
		{"similar names are not ranks", env("XPMI_RANK=1", "PMI_RANKS=2", "pmi_rank=3", "OMPI_COMM_WORLD_LOCAL_RANK=4"), MaxEnvironBytes, Rank{}, nil},
		{"long entries are skipped", env("A="+strings.Repeat("x", 3*environBuffer), "PMIX_RANK=8"), MaxEnvironBytes, Rank{"PMIX_RANK", 8}, nil},
		{"beyond the limit", env(strings.Repeat("x", 100), "PMI_RANK=1"), 100, Rank{}, ErrEnvironTruncated},
		{"entry cut by the limit", env("PMI_RANK=123"), 11, Rank{}, ErrEnvironTruncated},
		{"entry ending at the limit", env("PMI_RANK=123"), 13, Rank{"PMI_RANK", 123}, nil},
		{"found before the limit", env("PMIX_RANK=1", strings.Repeat("x", 100)), 50, Rank{"PMIX_RANK", 1}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRank(strings.NewReader(tt.environ), tt.limit)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("ParseRank = %+v, %v; want %+v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseRankNamesNoValue(t *testing.T) {
	_, err := ParseRank(strings.NewReader(env("OMPI_COMM_WORLD_RANK=s3cr3t")), MaxEnvironBytes)
	if err == nil || !strings.Contains(err.Error(), "OMPI_COMM_WORLD_RANK") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %v: want the variable named and its value left out", err)
	}
}

// countingReader counts what ParseRank reads.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestParseRankReadsAtMostLimitPlusOne(t *testing.T) {
	huge := &countingReader{r: io.MultiReader(strings.NewReader(env("HOME=/")), zeros{})}
	if _, err := ParseRank(huge, 1000); !errors.Is(err, ErrEnvironTruncated) {
		t.Errorf("endless environment: %v, want ErrEnvironTruncated", err)
	}
	if huge.n > 1001 {
		t.Errorf("read %d bytes of an endless environment with limit 1000", huge.n)
	}
}

// zeros is an endless stream of 'x'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// referenceRank is ParseRank's contract written plainly over the whole input.
func referenceRank(environ []byte, limit int) (Rank, error) {
	data, truncated := environ, len(environ) > limit
	if truncated {
		data = environ[:limit]
	}
	entries := bytes.Split(data, []byte{0})
	if truncated || len(data) == 0 || data[len(data)-1] == 0 {
		// The last piece is the empty one after a final NUL, or an entry the limit cut.
		entries = entries[:len(entries)-1]
	}
	var first [len(RankVariables)][]byte
	var seen [len(RankVariables)]bool
	for _, e := range entries {
		for i, name := range RankVariables {
			if v, ok := bytes.CutPrefix(e, []byte(name+"=")); ok && !seen[i] {
				seen[i], first[i] = true, v
			}
		}
	}
	malformed := ""
	for i, name := range RankVariables {
		if !seen[i] {
			continue
		}
		v, err := strconv.Atoi(string(first[i]))
		if err == nil && v >= 0 && v <= MaxRank && strconv.Itoa(v) == string(first[i]) {
			return Rank{Variable: name, Value: v}, nil
		}
		if malformed == "" {
			malformed = name
		}
	}
	if truncated {
		return Rank{}, ErrEnvironTruncated
	}
	if malformed != "" {
		return Rank{}, ErrMalformedRank
	}
	return Rank{}, nil
}

// FuzzParseRank checks ParseRank against the plain reference and its read bound on any input.
func FuzzParseRank(f *testing.F) {
	f.Add([]byte(env("PATH=/bin", "OMPI_COMM_WORLD_RANK=3", "PMIX_RANK=3")), 64)
	f.Add([]byte(env("PMI_RANK=01", "PMIX_RANK=2147483647")), 1024)
	f.Add([]byte("PMI_RANK=5"), 10)
	f.Add([]byte(env("A="+strings.Repeat("y", environBuffer), "PMI_RANK=1")), environBuffer+20)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, environ []byte, limit int) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		in := &countingReader{r: bytes.NewReader(environ)}
		got, err := ParseRank(in, limit)
		if in.n > limit+1 {
			t.Fatalf("read %d bytes with limit %d", in.n, limit)
		}
		want, wantErr := referenceRank(environ, limit)
		if got != want || !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Fatalf("ParseRank(%q, %d) = %+v, %v; reference %+v, %v", environ, limit, got, err, want, wantErr)
		}
	})
}

// BenchmarkParseRank searches a pod's environment of 2,000 Service variables with the rank last.
func BenchmarkParseRank(b *testing.B) {
	var entries []string
	for i := range 2000 {
		entries = append(entries, fmt.Sprintf("SERVICE_%d_PORT=tcp://10.96.%d.%d:443", i, i/256, i%256))
	}
	environ := env(append(entries, "OMPI_COMM_WORLD_RANK=17")...)
	b.SetBytes(int64(len(environ)))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := ParseRank(strings.NewReader(environ), MaxEnvironBytes); err != nil || r.Value != 17 {
			b.Fatal(r, err)
		}
	}
}
