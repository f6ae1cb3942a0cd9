// Package vm runs Go tests on real Linux kernels in qemu guests shaped like the machines finegrain
// meets in production: cgroup v1 and v2, several sockets, NUMA nodes (memory-only and uneven
// ones included), SMT and offline CPUs. It owns fetching and caching Debian's kernel (downloaded,
// never installed) with its RAM disk driver, which the guests load so that block I/O limits have
// a whole disk (/dev/ram0, 16 MiB); building static test binaries into a busybox initramfs;
// booting each configuration of the matrix with a timeout and one retry; and collecting every
// job's exit status and output from the serial console. Inside a guest, Guest(t) tells a test
// which machine qemu was given so it can assert what the kernel reports. It must not be imported
// by production code: it exists for tests and the `make test-vm` runner.
package vm
