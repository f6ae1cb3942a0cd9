package hpcc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// realOutput is the hpccoutf.txt of a real run on this project's development machine (Debian 12,
// 2 cores): Debian's hpcc 1.5.0-3 under Open MPI 4.1.4, with the input testdata/hpccinf-np2.txt
// that `go run ./bench/hpcc inf -tasks 2 -memory-per-task 16Mi` writes, run in an empty directory
// as `mpirun --allow-run-as-root --oversubscribe -np 2 hpcc`.
const realOutput = "testdata/hpccoutf-openmpi-np2.txt"

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRealOutput(t *testing.T) {
	sums, err := ParseFile(realOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 {
		t.Fatalf("got %d summaries, want 1", len(sums))
	}
	s := sums[0]
	if s.Line != 430 || len(s.Fields) != 148 {
		t.Errorf("summary at line %d with %d fields, want line 430 with 148 (the lines between the markers)", s.Line, len(s.Fields))
	}
	if first, last := s.Fields[0], s.Fields[len(s.Fields)-1]; first != (Field{"VersionMajor", "1"}) || last != (Field{"CPS_USING_FFTW", "0"}) {
		t.Errorf("first and last fields %v %v, want HPCC's order", first, last)
	}
	h, err := s.Headline()
	if err != nil {
		t.Fatal(err)
	}
	want := Headline{
		EPDGEMM:     Figure{"EP-DGEMM", KeyStarDGEMM, 3.50208, "GFLOP/s per process", true, ""},
		EPSTREAM:    Figure{"EP-STREAM", KeyStarSTREAM, 75.1945, "GB/s per process", true, ""},
		GRandomRing: Figure{"G-RandomRing", KeyRandomRing, 12.6527, "GB/s per process", true, ""},
		GFFT:        Figure{"G-FFT", KeyMPIFFT, 9.99991, "GFLOP/s", true, ""},
		Success:     true,
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headline (-want +got):\n%s", diff)
	}
	if got, want := s.Setup(), "2 MPI processes, HPL N=1440 NB=80 P×Q=1×2"; got != want {
		t.Errorf("Setup() = %q, want %q", got, want)
	}
	if v, ok := s.Value("VersionRelease"); !ok || v != "f" {
		t.Errorf("VersionRelease = %q %v, want f", v, ok)
	}
	if _, err := s.Float("VersionRelease"); err == nil || !strings.Contains(err.Error(), `VersionRelease="f" is not a number`) {
		t.Errorf("Float(VersionRelease) error = %v", err)
	}
	if _, err := s.Float("NoSuchKey"); err == nil || !strings.Contains(err.Error(), "line 430 has no NoSuchKey") {
		t.Errorf("Float(NoSuchKey) error = %v", err)
	}
}

// TestParseInLogs: prefixes on every line (kubectl logs --timestamps), CRLF line ends, other
// output around it and several runs give the same summaries, in order.
func TestParseInLogs(t *testing.T) {
	real := string(readFixture(t, realOutput))
	var prefixed strings.Builder
	for i, l := range strings.Split(real, "\n") {
		fmt.Fprintf(&prefixed, "2026-11-26T09:28:%02d.%dZ %s\r\n", i%60, i, l)
	}
	two := "Warning: Permanently added worker-0 to the list of known hosts.\n" + real + "mpirun noise\n" + real
	plain, err := Parse(strings.NewReader(real))
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{"prefixed": prefixed.String(), "two runs": two} {
		sums, err := Parse(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, s := range sums {
			if diff := cmp.Diff(plain[0].Fields, s.Fields); diff != "" {
				t.Errorf("%s: run %d fields (-want +got):\n%s", name, i+1, diff)
			}
		}
		if name == "two runs" && (len(sums) != 2 || sums[0].Line != 431 || sums[1].Line != 431+strings.Count(real, "\n")+1) {
			t.Errorf("two runs: got %d summaries at lines %v", len(sums), sums)
		}
	}
}

func TestParseErrors(t *testing.T) {
	real := string(readFixture(t, realOutput))
	begin := strings.Index(real, BeginSummary)
	end := strings.Index(real, EndSummary)
	tests := []struct {
		name, in string
		want     string
		noSum    bool
	}{
		{"empty", "", "no HPCC summary section (no line \"Begin of Summary section.\")", true},
		{"not HPCC", "hello\nworld\n", "this is not HPCC's output", true},
		{"run did not finish", real[:begin], "HPCC started (banner at line 2) but did not finish a run", true},
		{"cut inside the summary", real[:end], "the summary section of line 430 has no \"End of Summary section.\": the output is cut off", false},
		{"starts inside the summary", real[begin+len(BeginSummary):], "\"End of Summary section.\" without its beginning", false},
		{"two begins", real[:end] + real[begin:], "line 579: a second \"Begin of Summary section.\" before the summary section of line 430 ended", false},
		{"not key=value", strings.Replace(real, "LANG=C", "LANG C", 1), `line 435: "LANG C" inside the summary section of line 430 is not key=value`, false},
		{"bad key", strings.Replace(real, "LANG=C", "1LANG=C", 1), "is not key=value", false},
		{"duplicate key", strings.Replace(real, "LANG=C", "Success=1", 1), "line 436: Success appears twice in the summary section of line 430 (first on line 435)", false},
		{"empty summary", BeginSummary + "\n\n" + EndSummary + "\n", "line 3: the summary section of line 1 is empty", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			if errors.Is(err, ErrNoSummary) != tt.noSum {
				t.Errorf("errors.Is(err, ErrNoSummary) = %v, want %v", !tt.noSum, tt.noSum)
			}
		})
	}
}

func TestParseBoundsInput(t *testing.T) {
	real := readFixture(t, realOutput)
	if _, err := parse(bytes.NewReader(real), int64(len(real))); err != nil {
		t.Fatalf("input of exactly the limit: %v", err)
	}
	_, err := parse(bytes.NewReader(real), int64(len(real))-1)
	if err == nil || !strings.Contains(err.Error(), "input is larger than") {
		t.Fatalf("input over the limit: error = %v", err)
	}
	if _, err := ParseFile("testdata/no-such-file"); err == nil || !strings.Contains(err.Error(), "no-such-file") {
		t.Errorf("missing file: error = %v, want it to name the file", err)
	}
}

// withLine returns text with the summary line of key replaced by line ("" deletes it).
func withLine(t *testing.T, text, key, line string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + key + `=.*\n`)
	if !re.MatchString(text) {
		t.Fatalf("no line %s= to replace", key)
	}
	if line != "" {
		line += "\n"
	}
	return re.ReplaceAllLiteralString(text, line)
}

func TestHeadlineOfFailedAndBrokenRuns(t *testing.T) {
	real := string(readFixture(t, realOutput))
	one := func(t *testing.T, in string) Summary {
		t.Helper()
		sums, err := Parse(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		return sums[0]
	}
	h, err := one(t, withLine(t, real, KeySuccess, "Success=0")).Headline()
	if err != nil || h.Success || h.EPDGEMM.Value != 3.50208 {
		t.Errorf("failed run: headline %+v, error %v; want the figures with Success false", h, err)
	}
	for _, tt := range []struct{ key, line, want string }{
		{KeyMPIFFT, "", "G-FFT: summary section at line 430 has no MPIFFT_Gflops"},
		{KeyStarSTREAM, "StarSTREAM_Triad=nan", "EP-STREAM: summary section at line 430: StarSTREAM_Triad=NaN is not a finite number"},
		{KeyStarDGEMM, "StarDGEMM_Gflops=fast", `EP-DGEMM: summary section at line 430: StarDGEMM_Gflops="fast" is not a number`},
		{KeySuccess, "", "has no Success"},
	} {
		if _, err := one(t, withLine(t, real, tt.key, tt.line)).Headline(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s → %q: error = %v, want it to contain %q", tt.key, tt.line, err, tt.want)
		}
	}
}

// oneRank is the hpccoutf.txt of the local cluster's one-task job run by hand on the same
// machine: the input of `go run ./bench/hpcc inf -tasks 1 -memory-per-task 1Gi` (N=2400) and
// `mpirun --allow-run-as-root -np 1 hpcc`. With one process HPCC skips the ring.
const oneRank = "testdata/hpccoutf-openmpi-np1.txt"

func TestHeadlineOfOneRank(t *testing.T) {
	sums, err := ParseFile(oneRank)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sums[0].Headline()
	if err != nil {
		t.Fatal(err)
	}
	ring := Figure{"G-RandomRing", KeyRandomRing, 0, "GB/s per process", false, "not measured: HPCC runs the ring with 2 or more MPI processes"}
	if !h.Success || h.GRandomRing != ring || !h.EPDGEMM.Measured || !h.GFFT.Measured {
		t.Errorf("one rank: headline %+v", h)
	}
	b, err := json.Marshal(h.GRandomRing)
	if want := `{"benchmark":"G-RandomRing","key":"RandomlyOrderedRingBandwidth_GBytes","value":null,"unit":"GB/s per process","measured":false,"note":"not measured: HPCC runs the ring with 2 or more MPI processes"}`; err != nil || string(b) != want {
		t.Errorf("JSON %s (%v), want %s", b, err, want)
	}
	stream := withLine(t, string(readFixture(t, oneRank)), KeyStarSTREAM, "StarSTREAM_Triad=-1")
	sums, err = Parse(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := sums[0].Headline(); err != nil || h.EPSTREAM.Measured || !strings.Contains(h.EPSTREAM.Note, "HPCC wrote -1") {
		t.Errorf("STREAM at -1: %+v, %v", h.EPSTREAM, err)
	}
}

func TestSummaryJSONKeepsOrderAndNumbers(t *testing.T) {
	s := Summary{Line: 1, Fields: []Field{
		{"VersionMajor", "1"}, {"VersionRelease", "f"}, {"MPI_Wtick", "1.000000e-09"}, {"HPL_dMACH_EMIN", "-1.021000e+03"},
		{"Odd", "01"}, {"NaNish", "nan"}, {"Huge", "2e700"}, {"Empty", ""}, {"Quote", `a"b`},
	}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"VersionMajor":1,"VersionRelease":"f","MPI_Wtick":1.000000e-09,"HPL_dMACH_EMIN":-1.021000e+03,"Odd":"01","NaNish":"nan","Huge":"2e700","Empty":"","Quote":"a\"b"}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
}
