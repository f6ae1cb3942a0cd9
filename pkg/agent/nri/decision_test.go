package nri

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/classify"
	"github.com/finegrain-dev/finegrain/pkg/cgroup"
	"github.com/finegrain-dev/finegrain/pkg/policy"
)

func TestQueryFor(t *testing.T) {
	id := strings.Repeat("ab", 32)
	pinned := map[string]string{classify.LabelPinning: classify.PinningExclusive}
	for _, tc := range []struct {
		name             string
		labels, annots   map[string]string
		ctrID            string
		wantWait, wantID bool
	}{
		{"pinned API pod waits", pinned, map[string]string{configSourceAnnotation: sourceAPI}, id, true, true},
		{"shared API pod answers at once", nil, map[string]string{configSourceAnnotation: sourceAPI}, id, false, true},
		{"static pinned pod answers at once", pinned, map[string]string{configSourceAnnotation: "file"}, id, false, true},
		{"pod without a source answers at once", pinned, nil, id, false, true},
		{"invalid label value is not pinned", map[string]string{classify.LabelPinning: "yes"}, map[string]string{configSourceAnnotation: sourceAPI}, id, false, true},
		{"invalid container ID is left out", pinned, map[string]string{configSourceAnnotation: sourceAPI}, "../../etc", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := queryFor(&api.PodSandbox{Uid: "u", Labels: tc.labels, Annotations: tc.annots}, &api.Container{Id: tc.ctrID, Name: "c"}, cgroup.RuntimeContainerd)
			if q.wait != tc.wantWait || q.req.SharedIfUnknown == tc.wantWait || q.req.PodUID != "u" || q.req.Container != "c" {
				t.Errorf("query %+v, want wait %v", q, tc.wantWait)
			}
			if got := q.req.ID != (cgroup.ContainerID{}); got != tc.wantID {
				t.Errorf("ID %+v, want set %v", q.req.ID, tc.wantID)
			}
		})
	}
}

func TestAdjustment(t *testing.T) {
	excl := adjustment(agent.Decision{Exclusive: true, Resources: cgroup.Resources{CPUs: cpuset.New(2, 3), Mems: cpuset.New(0),
		CPUQuota: cgroup.Quota{QuotaUS: 1, PeriodUS: 100000}}})
	cpu := excl.GetLinux().GetResources().GetCpu()
	if cpu.GetCpus() != "2-3" || cpu.GetMems() != "0" || cpu.GetQuota() != nil || cpu.GetPeriod() != nil {
		t.Errorf("exclusive adjustment %v, want only cpuset 2-3/0", cpu)
	}
	shared := adjustment(agent.Decision{Resources: cgroup.Resources{CPUs: cpuset.New(0, 1, 4), Mems: cpuset.New(0, 1),
		CPUQuota: cgroup.Quota{QuotaUS: 50000, PeriodUS: 100000}, MemoryLimit: 1 << 30}})
	r := shared.GetLinux().GetResources()
	if r.GetCpu().GetCpus() != "0-1,4" || r.GetCpu().GetQuota().GetValue() != 50000 || r.GetCpu().GetPeriod().GetValue() != 100000 ||
		r.GetMemory().GetLimit().GetValue() != 1<<30 {
		t.Errorf("shared adjustment %v", r)
	}
	if plain := adjustment(agent.Decision{Resources: cgroup.Resources{CPUs: cpuset.New(1), Mems: cpuset.New(0)}}); plain.GetLinux().GetResources().GetMemory() != nil {
		t.Errorf("a decision without a memory limit adjusted memory: %v", plain.GetLinux().GetResources())
	}
}

func TestRefusalReason(t *testing.T) {
	key := policy.Key{PodUID: "u", Container: "c"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", &policy.TooLargeError{Key: key, Requested: 9}), RefusedTooLarge},
		{fmt.Errorf("x: %w", &policy.NoFitError{Key: key}), RefusedNoFit},
		{fmt.Errorf("pod u: %w", agent.ErrUnknownPod), RefusedUnknownPod},
		{errors.New("pod has no container"), RefusedOther},
	} {
		if got := refusalReason(tc.err); got != tc.want {
			t.Errorf("refusalReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestTolerated(t *testing.T) {
	for _, tc := range []struct {
		annots map[string]string
		want   bool
	}{
		{nil, false},
		{map[string]string{TolerateMissingAnnotation: "true"}, true},
		{map[string]string{TolerateMissingAnnotation: "1"}, true},
		{map[string]string{TolerateMissingAnnotation: "yes please"}, false},
		{map[string]string{TolerateMissingAnnotation + "/pod": "true"}, true},
		{map[string]string{TolerateMissingAnnotation + "/container.c": "false", TolerateMissingAnnotation: "true"}, false},
		{map[string]string{TolerateMissingAnnotation + "/container.other": "true"}, false},
	} {
		if got := tolerated(&api.PodSandbox{Annotations: tc.annots}, "c"); got != tc.want {
			t.Errorf("tolerated(%v) = %v, want %v", tc.annots, got, tc.want)
		}
	}
}

// TestCheckRejectsForeignCPUs: the validation refuses an adjustment whose cpuset is not the
// plugin's decision or was set by another plugin, and one the plugin never decided.
func TestCheckRejectsForeignCPUs(t *testing.T) {
	p, err := New(DefaultOptions(), nopAgent{}, nil, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	self := DefaultPluginIndex + "-" + DefaultPluginName
	req := func(cpus, mems, owner string) *api.ValidateContainerAdjustmentRequest {
		a := &api.ContainerAdjustment{}
		a.SetLinuxCPUSetCPUs(cpus)
		a.SetLinuxCPUSetMems(mems)
		owners := api.NewOwningPlugins()
		if err := owners.ClaimCPUSetCPUs("id", owner); err != nil {
			t.Fatal(err)
		}
		if err := owners.ClaimCPUSetMems("id", owner); err != nil {
			t.Fatal(err)
		}
		return &api.ValidateContainerAdjustmentRequest{Pod: &api.PodSandbox{Name: "w", Namespace: "ns"},
			Container: &api.Container{Id: "id", Name: "c"}, Adjust: a, Owners: owners}
	}
	want := pending{cpus: "2-3", mems: "0"}
	if err := p.check(req("2-3", "0", self), want, true); err != nil {
		t.Errorf("own decision rejected: %v", err)
	}
	if err := p.check(req("0-7", "0", self), want, true); err == nil || !strings.Contains(err.Error(), `"2-3"`) {
		t.Errorf("wrong cpus accepted: %v", err)
	}
	if err := p.check(req("2-3", "0", "20-other"), want, true); err == nil || !strings.Contains(err.Error(), "20-other") {
		t.Errorf("cpus set by another plugin accepted: %v", err)
	}
	if err := p.check(&api.ValidateContainerAdjustmentRequest{Pod: &api.PodSandbox{}, Container: &api.Container{Name: "c"}}, want, true); err == nil {
		t.Error("an adjustment without cpuset or owners accepted")
	}
	if err := p.check(req("0-7", "0-1", "20-other"), pending{passThrough: true}, true); err != nil {
		t.Errorf("pass-through rejected: %v", err)
	}
	if err := p.check(req("0-7", "0-1", self), pending{}, false); err == nil || !strings.Contains(err.Error(), TolerateMissingAnnotation) {
		t.Errorf("undecided container accepted: %v", err)
	}
}

type nopAgent struct{ Agent }

func TestSelect(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "nri.sock")
	if use, why := Select(ModeAuto, sock); use || !strings.Contains(why, "no NRI socket") {
		t.Errorf("auto without a socket = %v (%s)", use, why)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if use, why := Select(ModeAuto, file); use || !strings.Contains(why, "not a socket") {
		t.Errorf("auto on a regular file = %v (%s)", use, why)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if use, _ := Select(ModeAuto, sock); !use {
		t.Error("auto with a socket chose inotify")
	}
	if use, _ := Select(ModeOff, sock); use {
		t.Error("off chose NRI")
	}
	if use, _ := Select(ModeOn, filepath.Join(dir, "absent")); !use {
		t.Error("on chose inotify")
	}
	for _, s := range []string{"auto", "on", "off"} {
		if _, err := ParseMode(s); err != nil {
			t.Errorf("ParseMode(%q) = %v", s, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("ParseMode(yes) = nil error")
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, mod := range []func(*Options){
		func(o *Options) { o.SocketPath = "" },
		func(o *Options) { o.PluginName = "" },
		func(o *Options) { o.PluginIndex = "1" },
		func(o *Options) { o.PluginIndex = "ab" },
		func(o *Options) { o.PodWait = -1 },
		func(o *Options) { o.MinBackoff = 0 },
		func(o *Options) { o.MaxBackoff = o.MinBackoff / 2 },
	} {
		o := DefaultOptions()
		mod(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}
