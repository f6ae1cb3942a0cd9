# Sourced by .ci/run and the Makefile targets: installs the Debian packages a target needs on a
# fresh Debian 12 machine. Each install is idempotent and quiet when everything is present.
# Usage: install_deps GROUP...   (groups: test, hwloc, bench, vm, slurm, images, cluster)

deps_test=(util-linux)
# make topology-crosscheck: hwloc's lstopo, the second opinion on this machine's topology.
deps_hwloc=(hwloc)
# make fgworker-openblas / bench-pinning: DGEMM through OpenBLAS via cgo.
deps_bench=(libopenblas-dev gcc libc6-dev)
# make test-vm: qemu boots Debian's kernel (fetched with apt-get download, never installed) with a
# busybox-static initramfs; xz unpacks the kernel, cpio is the reference reader in the tests.
deps_vm=(qemu-system-x86 busybox-static cpio xz-utils)
# make test: the Slurm tests (pkg/slurm, the placer's Slurm bridge) start a real munged, slurmctld
# and slurmd of their own on loopback; without these packages they skip.
deps_slurm=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge)
# make images: mmdebstrap builds the MPI image's Debian root file system (hack/images/mpi.sh).
deps_images=(mmdebstrap)
# make cluster-up / e2e / demo: the local cluster's etcd, container runtime and CNI loopback plugin,
# openssl for its certificates, envsubst for its configs, curl for health checks, ss for ports,
# and what its images need (they build on the way up).
deps_cluster=(etcd-server containerd runc containernetworking-plugins openssl gettext-base curl iproute2 util-linux "${deps_images[@]}")

install_deps() {
  local want=() g pkg
  for g in "$@"; do
    local -n group="deps_$g"
    for pkg in "${group[@]}"; do
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || want+=("$pkg")
    done
  done
  [ ${#want[@]} -eq 0 ] && return 0
  echo "installing Debian packages: ${want[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "need root to apt-get install ${want[*]}" >&2
    return 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}
