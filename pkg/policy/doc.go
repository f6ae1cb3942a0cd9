// Package policy owns the node agent's core-allocation decisions: which CPUs are reserved, which
// belong to the shared pool, and which whole cores of one NUMA node each pinned container holds
// exclusively; it also owns the versioned, checksummed checkpoint encoding of that state and the
// start-up reconciliation that repairs a stale, foreign or corrupt checkpoint against the discovered
// topology and what the cgroups carry. It is pure: it takes topologies, requests and bytes as data
// and returns decisions as data. It must not read sysfs, write cgroups or files, talk to the API
// server, or lock: the agent serialises calls under its own mutex.
package policy
