// Package kerneltest holds pkg/cgroup's real-kernel tests and benchmarks (and those of
// pkg/slurm's TaskProlog, which reads what MoveProcesses does from /proc): as root they build
// kubelet-shaped cgroup trees inside a subtree the test owns (finegrain-test-<pid> in each
// hierarchy), start multi-threaded helper processes in them, drive the real writer and process
// reader, and check every thread's CPU affinity with sched_getaffinity and /proc. Each test
// removes everything it created, even on failure, and touches no other cgroup. The v1 tests run
// where cpuset, cpu and memory are cgroup v1 hierarchies, the v2 tests where cgroup2 carries them
// (the qemu guests); elsewhere, and without root, they skip saying why. The package has no
// non-test code: it is separate from pkg/cgroup because the fixture tests there run the cgroup
// library in its test mode, which must stay off on a real cgroup file system.
package kerneltest
