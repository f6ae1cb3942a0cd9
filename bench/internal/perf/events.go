// Package perf counts events for every thread of one process through perf_event_open(2):
// the software counters every Linux kernel has (task-clock, context-switches, cpu-migrations,
// page-faults) and the hardware ones a PMU may offer (cycles, instructions, last-level-cache
// loads and misses). A counter the kernel refuses is reported as unavailable with the errno and
// what it means, never as zero. The package only opens, enables and reads counters; it does not
// choose what runs or where, and it never writes to /proc or cgroups.
package perf

import "golang.org/x/sys/unix"

// Event is one counter the kernel is asked for.
type Event struct {
	// Name is the perf(1) spelling, e.g. "task-clock" or "LLC-load-misses".
	Name string
	// Unit is what the value counts: "ns" for task-clock, "" for plain event counts.
	Unit string
	// Type and Config select the event (perf_event_attr.type and .config).
	Type   uint32
	Config uint64
}

// hwCache encodes a PERF_TYPE_HW_CACHE config: cache id, operation, result.
func hwCache(cache, op, result uint64) uint64 { return cache | op<<8 | result<<16 }

// SoftwareEvents are counted by the kernel itself and exist on every machine, virtual or not.
var SoftwareEvents = []Event{
	{Name: "task-clock", Unit: "ns", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK},
	{Name: "context-switches", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
	{Name: "cpu-migrations", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_MIGRATIONS},
	{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS},
}

// HardwareEvents need a PMU; virtual machines often expose none.
var HardwareEvents = []Event{
	{Name: "cycles", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES},
	{Name: "instructions", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS},
	{Name: "LLC-loads", Type: unix.PERF_TYPE_HW_CACHE,
		Config: hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS)},
	{Name: "LLC-load-misses", Type: unix.PERF_TYPE_HW_CACHE,
		Config: hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS)},
}

// DefaultEvents is every software and hardware event, software first.
func DefaultEvents() []Event {
	return append(append([]Event(nil), SoftwareEvents...), HardwareEvents...)
}
