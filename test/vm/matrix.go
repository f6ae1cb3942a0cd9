package vm

// dualSocketSMT is 2 sockets × 2 cores × 2 threads with one NUMA node per socket: the smallest
// machine with every level of the hierarchy finegrain allocates over.
func dualSocketSMT() Machine {
	return Machine{
		Sockets: 2, CoresPerSocket: 2, ThreadsPerCore: 2,
		Nodes: []Node{{CPUs: "0-3", MemoryMiB: 1024}, {CPUs: "4-7", MemoryMiB: 1024}},
	}
}

// guestTests selects a package's tests written for the guests (named TestGuest...), leaving its
// unit tests to the host, where they run faster than under emulation.
var guestTests = []string{"-test.run", "^TestGuest"}

// kernelJobs are the packages whose tests meet the real kernel; every configuration runs them and
// each test skips what its guest does not offer.
func kernelJobs() []Job {
	return []Job{
		{Package: "./test/vm", Args: guestTests},
		{Package: "./pkg/topology", Args: guestTests},
		// Every test of kerneltest drives the real kernel's cgroups.
		{Package: "./pkg/cgroup/kerneltest"},
	}
}

// Matrix returns the standard configurations `make test-vm` boots.
func Matrix() []Config {
	memoryOnly := dualSocketSMT()
	memoryOnly.Nodes = append(memoryOnly.Nodes, Node{MemoryMiB: 512})
	memoryOnly.Distances = [][]int{{10, 21, 30}, {21, 10, 30}, {30, 30, 10}}

	return []Config{
		{
			Name:    "v2-2numa-smt",
			About:   "cgroup v2, 2 sockets × 2 cores × 2 threads, one NUMA node per socket",
			Machine: dualSocketSMT(),
			Cgroup:  CgroupV2,
			Jobs:    kernelJobs(),
		},
		{
			Name:    "v1-2numa-smt",
			About:   "cgroup v1 hierarchies, same machine as v2-2numa-smt",
			Machine: dualSocketSMT(),
			Cgroup:  CgroupV1,
			Jobs:    kernelJobs(),
		},
		{
			Name:    "v2-memory-only-node",
			About:   "cgroup v2, 2 sockets × 2 cores × 2 threads plus a memory-only NUMA node (CXL/HBM-like)",
			Machine: memoryOnly,
			Cgroup:  CgroupV2,
			Jobs:    kernelJobs(),
		},
		{
			Name:  "v2-uneven-3numa-offline",
			About: "cgroup v2, 2 sockets × 3 cores × 2 threads in 3 uneven NUMA nodes, CPU 11 offline",
			Machine: Machine{
				Sockets: 2, CoresPerSocket: 3, ThreadsPerCore: 2,
				Nodes: []Node{
					{CPUs: "0-5", MemoryMiB: 768},
					{CPUs: "6-7", MemoryMiB: 256},
					{CPUs: "8-11", MemoryMiB: 512},
				},
				Distances: [][]int{{10, 21, 31}, {21, 10, 12}, {31, 12, 10}},
				MaxCPUs:   11,
			},
			Cgroup: CgroupV2,
			Jobs:   kernelJobs(),
		},
	}
}

// Extra returns opt-in configurations, booted only when named (-config): they take too long for
// every CI run.
func Extra() []Config {
	worker := Job{Package: "./bench/worker", Program: true, Helper: true}
	return []Config{{
		Name: "v2-2numa-pinning-bench",
		About: "the pinning benchmark (bench/pinning: alone, unmanaged beside a noisy neighbour, exclusive) " +
			"in the 2-NUMA guest; under TCG it shows placement, not speed",
		Machine: dualSocketSMT(),
		Cgroup:  CgroupV2,
		Jobs: []Job{worker, {
			Package: "./bench/pinning", Program: true,
			Args: []string{
				"-worker", worker.GuestPath(), "-scenarios", "alone,unmanaged,exclusive",
				"-repeats", "3", "-duration", "2s", "-n", "256", "-ntimes", "5",
				"-noise-threads", "4", "-noise-mib", "64", "-out", "/tmp/pinning", "-o", "table",
			},
		}},
	}}
}
