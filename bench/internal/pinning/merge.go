package pinning

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxSamplesFile bounds samples.json: a run of every scenario with many repeats is a few MB.
const maxSamplesFile = 256 << 20

// Merge reads the samples.json and context.json that earlier runs wrote into dirs (for example
// the phases of a run on a cluster whose kubelet had to be restarted with another CPU manager
// policy) and returns all their samples with one context that names every part.
func Merge(dirs []string) ([]Sample, Context, error) {
	var all []Sample
	var merged Context
	for i, dir := range dirs {
		samples, err := readSamples(filepath.Join(dir, "samples.json"))
		if err != nil {
			return nil, Context{}, err
		}
		ctx, err := readContext(filepath.Join(dir, "context.json"))
		if err != nil {
			return nil, Context{}, err
		}
		if i == 0 {
			merged = Context{LoadBefore: ctx.LoadBefore, CPUs: ctx.CPUs, Ranks: ctx.Ranks, Entry: ctx.Entry}
		} else if ctx.Ranks != merged.Ranks || ctx.CPUs != merged.CPUs {
			return nil, Context{}, fmt.Errorf("%s ran %d rank(s) on %d CPUs, %s %d on %d: ratios across them would mislead",
				dirs[0], merged.Ranks, merged.CPUs, dir, ctx.Ranks, ctx.CPUs)
		}
		merged.LoadAfter = ctx.LoadAfter
		merged.Notes = append(merged.Notes, fmt.Sprintf("part %d (%s): `%s`, load average before %s, after %s", i+1, dir, ctx.Command, ctx.LoadBefore, ctx.LoadAfter))
		for _, n := range ctx.Notes {
			if !slices.Contains(merged.Notes, n) {
				merged.Notes = append(merged.Notes, n)
			}
		}
		all = append(all, samples...)
	}
	if len(all) == 0 {
		return nil, Context{}, errors.New("no samples to merge: name the directories earlier runs wrote (-merge dir1,dir2)")
	}
	return all, merged, nil
}

func readSamples(path string) ([]Sample, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	samples, err := ParseSamples(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return samples, nil
}

// ParseSamples reads a samples.json document and checks every sample.
func ParseSamples(data []byte) ([]Sample, error) {
	var samples []Sample
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&samples); err != nil {
		return nil, fmt.Errorf("not a samples.json of bench/pinning (is it from the same version?): %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the samples")
	}
	for i, s := range samples {
		switch {
		case s.Via != ViaCgroups && s.Via != ViaPods:
			return nil, fmt.Errorf("sample %d: via %q, want %s or %s", i, s.Via, ViaCgroups, ViaPods)
		case !slices.Contains(AllScenarios, s.Scenario):
			return nil, fmt.Errorf("sample %d: unknown scenario %q", i, s.Scenario)
		case !slices.Contains(AllBenchmarks, s.Benchmark) || s.Run.Benchmark != s.Benchmark:
			return nil, fmt.Errorf("sample %d: benchmark %q with a %q run", i, s.Benchmark, s.Run.Benchmark)
		}
		if err := s.Run.Validate(); err != nil {
			return nil, fmt.Errorf("sample %d (%s %s, repeat %d): %w", i, s.Scenario, s.Benchmark, s.Repeat, err)
		}
	}
	return samples, nil
}

func readContext(path string) (Context, error) {
	data, err := readBounded(path)
	if err != nil {
		return Context{}, err
	}
	var ctx Context
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ctx); err != nil {
		return Context{}, fmt.Errorf("%s: not a context.json of bench/pinning: %w", path, err)
	}
	if ctx.Ranks < 1 || ctx.CPUs < 1 || strings.TrimSpace(ctx.Command) == "" {
		return Context{}, fmt.Errorf("%s: no command, ranks or CPUs recorded", path)
	}
	return ctx, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read an earlier run's results: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSamplesFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxSamplesFile {
		return nil, fmt.Errorf("%s is larger than %d MiB: not a samples file of this bench", path, maxSamplesFile>>20)
	}
	return data, nil
}
