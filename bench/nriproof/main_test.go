package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"-modes", "inotify", "-pods", "7", "-json", "out.json"}, io.Discard)
	if err != nil || !slices.Equal(o.modes, []mode{modeInotify}) || o.pods != 7 || o.jsonOut != "out.json" {
		t.Errorf("parse = %+v, %v", o, err)
	}
	for _, args := range [][]string{{"-modes", "nri,scan"}, {"-pods", "0"}, {"extra"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

func TestWithMode(t *testing.T) {
	args := []string{"--cgroup-driver=cgroupfs", "--nri=auto", "--nri-socket=/var/run/nri/nri.sock", "--inotify=false"}
	if got := withMode(args, modeNRI); !slices.Equal(got, []string{"--cgroup-driver=cgroupfs", "--nri-socket=/var/run/nri/nri.sock", "--nri=on"}) {
		t.Errorf("nri args %q", got)
	}
	if got := withMode(args, modeInotify); !slices.Equal(got, []string{"--cgroup-driver=cgroupfs", "--nri-socket=/var/run/nri/nri.sock", "--nri=off", "--inotify=true"}) {
		t.Errorf("inotify args %q", got)
	}
}

func TestReadAgentLog(t *testing.T) {
	const log = `{"time":"t","level":"INFO","msg":"pinned container","podUID":"u1","via":"nri","window":0}
{"time":"t","level":"INFO","msg":"NRI: container created pinned","podUID":"u1","took":42500}
{"time":"t","level":"INFO","msg":"pinned container","podUID":"u2","via":"inotify","window":"1.5ms"}
not json at all
{"time":"t","level":"INFO","msg":"pinned container","podUID":"other","via":"scan","window":7}
`
	s1, s2 := &sample{}, &sample{}
	if err := readAgentLog(strings.NewReader(log), map[string]*sample{"u1": s1, "u2": s2}); err != nil {
		t.Fatal(err)
	}
	if s1.Via != "nri" || s1.Window != 0 || s1.Hook != 42500*time.Nanosecond || s2.Via != "inotify" || s2.Window != 1500*time.Microsecond {
		t.Errorf("samples %+v %+v", s1, s2)
	}
	bad := `{"msg":"pinned container","podUID":"u1","via":"nri","window":true}`
	if err := readAgentLog(strings.NewReader(bad), map[string]*sample{"u1": s1}); err == nil {
		t.Error("a window that is no duration was accepted")
	}
}

// The two lines containerd 2.4 and 1.6 log for one CreateContainer, and a pair from before the
// run.
const containerdLog = `time="2026-11-22T02:00:00.000000000Z" level=info msg="CreateContainer within sandbox \"aa11\" for container name:\"worker\""
time="2026-11-22T02:00:00.100000000Z" level=info msg="CreateContainer within sandbox \"aa11\" for name:\"worker\" returns container id \"0dd\""
time="2026-11-22T03:00:00.000000000Z" level=info msg="CreateContainer within sandbox \"bb22\" for container name:\"worker\""
time="2026-11-22T03:00:00.001000000Z" level=info msg="something else"
time="2026-11-22T03:00:00.002500000Z" level=info msg="CreateContainer within sandbox \"bb22\" for name:\"worker\" returns container id \"c0ffee\""
time="2026-11-22T03:00:01.000000000Z" level=info msg="CreateContainer within sandbox \"cc33\" for container &ContainerMetadata{Name:worker,Attempt:0,}"
time="2026-11-22T03:00:01.070000000Z" level=info msg="CreateContainer within sandbox \"cc33\" for &ContainerMetadata{Name:worker,Attempt:0,} returns container id \"beef\""
`

func TestCreateContainerTimes(t *testing.T) {
	since := time.Date(2026, 11, 22, 2, 30, 0, 0, time.UTC)
	got, err := createContainerTimes(strings.NewReader(containerdLog), since)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["c0ffee"] != 2500*time.Microsecond || got["beef"] != 70*time.Millisecond {
		t.Errorf("times %v, want c0ffee: 2.5ms and beef: 70ms only", got)
	}
	if _, err := createContainerTimes(strings.NewReader(`time="yesterday" level=info msg="CreateContainer within sandbox \"ab\" for container name:\"w\""`), since); err == nil {
		t.Error("a bad time was accepted")
	}
}

func TestReadRun(t *testing.T) {
	data, err := os.ReadFile("../internal/result/testdata/stream-2proc.json")
	if err != nil {
		t.Fatal(err)
	}
	var s sample
	if err := s.readRun(data); err == nil || !strings.Contains(err.Error(), "2 processes") {
		t.Errorf("a two-rank run = %v, want a refusal", err)
	}
	if err := s.readRun([]byte("fgworker: oops")); err == nil {
		t.Error("non-JSON logs accepted")
	}
}

func TestSummarizeMode(t *testing.T) {
	samples := []sample{
		{PinnedAtInit: true, Via: "nri", Hook: 10 * time.Microsecond, CreateContainer: time.Millisecond, SpecCPUs: "1", SpecRead: true, SpecPinned: true},
		{PinnedAtInit: true, Via: "nri", Hook: 30 * time.Microsecond, CreateContainer: 3 * time.Millisecond},
		{Error: "the worker failed"},
	}
	r := summarizeMode(samples)
	if r.Pods != 3 || r.Measured != 2 || r.PinnedAtInit != 2 || r.Vias["nri"] != 2 || r.Hook.P50 != 10*time.Microsecond ||
		r.Hook.P99 != 30*time.Microsecond || r.CreateContainer.Max != 3*time.Millisecond || r.SpecRead != 1 || r.SpecPinned != 1 {
		t.Errorf("summary %+v", r)
	}
	var b strings.Builder
	if err := writeTable(&b, result{Modes: map[mode]modeResult{modeNRI: r, modeInotify: r}}, []mode{modeNRI, modeInotify}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "2 of 2") || !strings.Contains(b.String(), "with the plugin minus without (p50): 0.00 ms") {
		t.Errorf("table:\n%s", b.String())
	}
}
