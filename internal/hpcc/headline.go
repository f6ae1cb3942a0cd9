package hpcc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Summary keys of the paper's four benchmarks and of the run's verdict. The EP ("star")
// figures are the mean over the processes, each running its own copy at once; the G ("global")
// ones are of the whole job.
const (
	KeyStarDGEMM  = "StarDGEMM_Gflops"
	KeyStarSTREAM = "StarSTREAM_Triad"
	KeyRandomRing = "RandomlyOrderedRingBandwidth_GBytes"
	KeyMPIFFT     = "MPIFFT_Gflops"
	// KeySuccess is 1 when every test passed its verification.
	KeySuccess = "Success"
)

// headline maps the paper's benchmark names to HPCC's keys and units, in the paper's order.
var headline = [4]struct{ bench, key, unit string }{
	{"EP-DGEMM", KeyStarDGEMM, "GFLOP/s per process"},
	{"EP-STREAM", KeyStarSTREAM, "GB/s per process"},
	{"G-RandomRing", KeyRandomRing, "GB/s per process"},
	{"G-FFT", KeyMPIFFT, "GFLOP/s"},
}

// Figure is one headline number: the paper's benchmark name, HPCC's summary key, the value and
// its unit. HPCC writes -1 for a test it did not run (the ring, with one MPI process): such a
// figure is not Measured, its Value is 0 (null in JSON) and Note says why.
type Figure struct {
	Benchmark string
	Key       string
	Value     float64
	Unit      string
	Measured  bool
	Note      string
}

// MarshalJSON writes the figure with lower-case names and a null value when it was not measured.
func (f Figure) MarshalJSON() ([]byte, error) {
	out := struct {
		Benchmark string   `json:"benchmark"`
		Key       string   `json:"key"`
		Value     *float64 `json:"value"`
		Unit      string   `json:"unit"`
		Measured  bool     `json:"measured"`
		Note      string   `json:"note,omitempty"`
	}{f.Benchmark, f.Key, nil, f.Unit, f.Measured, f.Note}
	if f.Measured {
		out.Value = &f.Value
	}
	return json.Marshal(out)
}

// Headline is what the paper reports of an HPCC run, and whether HPCC judged the run correct
// (Success=1: every test passed its verification).
type Headline struct {
	EPDGEMM     Figure `json:"EP-DGEMM"`
	EPSTREAM    Figure `json:"EP-STREAM"`
	GRandomRing Figure `json:"G-RandomRing"`
	GFFT        Figure `json:"G-FFT"`
	Success     bool   `json:"Success"`
}

// Figures returns the four figures in the paper's order.
func (h Headline) Figures() []Figure {
	return []Figure{h.EPDGEMM, h.EPSTREAM, h.GRandomRing, h.GFFT}
}

// Headline reads the paper's figures and Success from the summary. A missing key or a value that
// is not a finite number is an error; a negative value is HPCC's "not measured" (the figure
// says so), and a failed run (Success=0) is not an error either: check Success.
func (s Summary) Headline() (Headline, error) {
	var h Headline
	for i, dst := range []*Figure{&h.EPDGEMM, &h.EPSTREAM, &h.GRandomRing, &h.GFFT} {
		f := headline[i]
		v, err := s.Float(f.key)
		if err != nil {
			return Headline{}, fmt.Errorf("%s: %w", f.bench, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Headline{}, fmt.Errorf("%s: summary section at line %d: %s=%v is not a finite number", f.bench, s.Line, f.key, v)
		}
		*dst = Figure{Benchmark: f.bench, Key: f.key, Value: v, Unit: f.unit, Measured: v >= 0}
		if !dst.Measured {
			dst.Value, dst.Note = 0, s.notMeasured(f.key)
		}
	}
	ok, err := s.Float(KeySuccess)
	if err != nil {
		return Headline{}, err
	}
	h.Success = ok == 1
	return h, nil
}

// notMeasured says why HPCC left key at its initial -1.
func (s Summary) notMeasured(key string) string {
	if procs, _ := s.Value("CommWorldProcs"); key == KeyRandomRing && procs == "1" {
		return "not measured: HPCC runs the ring with 2 or more MPI processes"
	}
	return "not measured: HPCC wrote -1 (its section in hpccoutf.txt says why)"
}

// Setup describes the run's shape from its summary — MPI processes, HPL's N, NB and P×Q grid —
// leaving out what HPCC did not write.
func (s Summary) Setup() string {
	var parts []string
	if v, ok := s.Value("CommWorldProcs"); ok {
		parts = append(parts, v+" MPI processes")
	}
	var hpl []string
	for _, k := range []string{"N", "NB"} {
		if v, ok := s.Value("HPL_" + k); ok {
			hpl = append(hpl, k+"="+v)
		}
	}
	p, okP := s.Value("HPL_nprow")
	q, okQ := s.Value("HPL_npcol")
	if okP && okQ {
		hpl = append(hpl, "P×Q="+p+"×"+q)
	}
	if len(hpl) > 0 {
		parts = append(parts, "HPL "+strings.Join(hpl, " "))
	}
	return strings.Join(parts, ", ")
}

// MarshalJSON writes the summary as one JSON object in HPCC's order: values that are JSON
// numbers as written (and within float64's range) become numbers, every other value a string.
func (s Summary) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		if isJSONNumber(f.Value) {
			b.WriteString(f.Value)
			continue
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// isJSONNumber reports whether v is, as written, a JSON number (valid JSON that starts like
// one) that a float64 holds, so that every JSON reader can take it (2e700 stays a string).
func isJSONNumber(v string) bool {
	if v == "" || !(v[0] == '-' || '0' <= v[0] && v[0] <= '9') || !json.Valid([]byte(v)) {
		return false
	}
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}
