package cgroup

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/cpuset"
)

func TestValues(t *testing.T) {
	r := Resources{
		CPUs: cpuset.New(2, 3, 8), Mems: cpuset.New(1),
		CPUQuota: Quota{QuotaUS: 50000, PeriodUS: 100000}, CPUShares: 1024,
		MemoryLimit: 1<<30 + 100,
	}
	wantV1 := []Value{
		{CPUSet, "cpuset.cpus", "2-3,8"}, {CPUSet, "cpuset.mems", "1"},
		{CPU, "cpu.cfs_period_us", "100000"}, {CPU, "cpu.cfs_quota_us", "50000"}, {CPU, "cpu.shares", "1024"},
		{Memory, "memory.limit_in_bytes", "1073741824"},
	}
	if diff := cmp.Diff(wantV1, r.Values(V1)); diff != "" {
		t.Errorf("v1 values (-want +got):\n%s", diff)
	}
	wantV2 := []Value{
		{CPUSet, "cpuset.cpus", "2-3,8"}, {CPUSet, "cpuset.mems", "1"},
		{CPU, "cpu.max", "50000 100000"}, {CPU, "cpu.weight", "100"},
		{Memory, "memory.max", "1073741824"},
	}
	if diff := cmp.Diff(wantV2, r.Values(V2)); diff != "" {
		t.Errorf("v2 values (-want +got):\n%s", diff)
	}
	unl := Resources{CPUQuota: Quota{QuotaUS: QuotaUnlimited, PeriodUS: 100000}, MemoryLimit: MemoryUnlimited}
	if diff := cmp.Diff([]Value{{CPU, "cpu.cfs_period_us", "100000"}, {CPU, "cpu.cfs_quota_us", "-1"}, {Memory, "memory.limit_in_bytes", "-1"}}, unl.Values(V1)); diff != "" {
		t.Errorf("v1 unlimited (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Value{{CPU, "cpu.max", "max 100000"}, {Memory, "memory.max", "max"}}, unl.Values(V2)); diff != "" {
		t.Errorf("v2 unlimited (-want +got):\n%s", diff)
	}
	if got := (Resources{}).Values(V2); len(got) != 0 {
		t.Errorf("zero Resources produce %v, want nothing", got)
	}
}

// TestExclusiveValues: an exclusive pin sets v1's cpuset.memory_migrate before its mems, so the
// pages a container allocated before its pin follow it; v2 migrates without a flag.
func TestExclusiveValues(t *testing.T) {
	pin := Exclusive(cpuset.New(4, 5), cpuset.New(1))
	wantV1 := []Value{{CPUSet, "cpuset.cpus", "4-5"}, {CPUSet, "cpuset.memory_migrate", "1"}, {CPUSet, "cpuset.mems", "1"}}
	if diff := cmp.Diff(wantV1, pin.Values(V1)); diff != "" {
		t.Errorf("v1 values (-want +got):\n%s", diff)
	}
	wantV2 := []Value{{CPUSet, "cpuset.cpus", "4-5"}, {CPUSet, "cpuset.mems", "1"}}
	if diff := cmp.Diff(wantV2, pin.Values(V2)); diff != "" {
		t.Errorf("v2 values (-want +got):\n%s", diff)
	}
	if shared := (Resources{CPUs: cpuset.New(0, 1), Mems: cpuset.New(0, 1)}); len(shared.Values(V1)) != 2 {
		t.Errorf("shared values %v: want cpus and mems only (the shared pool's mems only widen)", shared.Values(V1))
	}
}

// TestSharesToWeight pins the conversion runc applies to a container's shares on v2, so the
// writer never fights the value runc set at creation.
func TestSharesToWeight(t *testing.T) {
	for shares, weight := range map[uint64]string{2: "1", 1024: "100", 262144: "10000", 512: "59", 102: "17"} {
		got := Resources{CPUShares: shares}.Values(V2)[0].Data
		if got != weight {
			t.Errorf("shares %d -> weight %s, want %s", shares, got, weight)
		}
	}
}

func TestResourcesValidate(t *testing.T) {
	for _, tc := range []struct {
		r       Resources
		wantErr string
	}{
		{Resources{CPUQuota: Quota{QuotaUS: 5000}}, "without a period"},
		{Resources{CPUQuota: Quota{QuotaUS: 5000, PeriodUS: 999}}, "period 999"},
		{Resources{CPUQuota: Quota{QuotaUS: 5000, PeriodUS: 1000001}}, "period 1000001"},
		{Resources{CPUQuota: Quota{QuotaUS: 999, PeriodUS: 100000}}, "quota 999"},
		{Resources{CPUQuota: Quota{QuotaUS: -2, PeriodUS: 100000}}, "quota -2"},
		{Resources{CPUQuota: Quota{QuotaUS: 1 << 44, PeriodUS: 100000}}, "quota 17592186044416"},
		{Resources{CPUShares: 1}, "shares 1"},
		{Resources{CPUShares: 262145}, "shares 262145"},
		{Resources{MemoryLimit: 100}, "memory limit 100"},
		{Resources{MemoryLimit: -5}, "memory limit -5"},
	} {
		err := tc.r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tc.r, err, tc.wantErr)
		}
	}
	ok := Resources{CPUs: cpuset.New(0), CPUQuota: Quota{QuotaUnlimited, 1000000}, CPUShares: 2, MemoryLimit: MemoryUnlimited}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", ok, err)
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ file, raw, want string }{
		{"cpuset.cpus", "0,1,2,5\n", "0-2,5"},
		{"cpuset.cpus", "\n", ""},
		{"cpuset.mems", "0-1\n", "0-1"},
		{"cpu.cfs_quota_us", "-1\n", "-1"},
		{"cpu.shares", "01024\n", "1024"},
		{"cpuset.memory_migrate", "0\n", "0"},
		{"memory.limit_in_bytes", v1MemUnlimited + "\n", "-1"},
		{"memory.limit_in_bytes", "1073741824\n", "1073741824"},
		{"memory.max", "max\n", "max"},
		{"memory.max", "4096\n", "4096"},
		{"cpu.max", "max 100000\n", "max 100000"},
		{"cpu.max", "50000 100000\n", "50000 100000"},
		{"cpuset.cpus.partition", "root invalid (Cpu list in cpuset.cpus not exclusive)\n", "root invalid (Cpu list in cpuset.cpus not exclusive)"},
	} {
		got, err := canonical(tc.file, tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("canonical(%s, %q) = %q, %v; want %q", tc.file, tc.raw, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ file, raw string }{
		{"cpuset.cpus", "zero"}, {"cpu.shares", "many"}, {"cpuset.memory_migrate", "yes"}, {"memory.limit_in_bytes", "-2"},
		{"memory.max", "lots"}, {"cpu.max", "100000"}, {"cpu.max", "x 100000"}, {"cpu.max", "max y"},
		{"cgroup.procs", "1"},
	} {
		if got, err := canonical(tc.file, tc.raw); err == nil {
			t.Errorf("canonical(%s, %q) = %q, want an error", tc.file, tc.raw, got)
		}
	}
}
