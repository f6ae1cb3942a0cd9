#!/usr/bin/env bash
# Copies exactly the sysfs files finegrain's topology discovery reads (pkg/topology.Discover and
# ReadHardware: caches, NUMA memory, PCI devices) from a machine's /sys into a directory laid out
# like /sys, so the machine can become a test fixture or be
# sent with a bug report. Needs only bash and coreutils; reads, never writes, under the source.
#
# Usage: hack/capture-sysfs.sh [--from SYSFS_ROOT] DEST
#   DEST          new directory to pass to `nodeagent topology --sysfs-root DEST`
#   --from ROOT   sysfs to copy from (default /sys)
#
# Example: hack/capture-sysfs.sh /tmp/mynode/sys && tar czf mynode.tgz -C /tmp mynode
set -euo pipefail

usage() { sed -n '2,10s/^# \{0,1\}//p' "$0" >&2; exit 2; }

src=/sys
while [ $# -gt 0 ]; do
  case $1 in
    --from) [ $# -ge 2 ] || usage; src=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "capture-sysfs: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
dest=$1
if [ -e "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
  echo "capture-sysfs: $dest exists and is not empty; choose a new directory" >&2
  exit 1
fi
[ -d "$src/devices/system/cpu" ] || { echo "capture-sysfs: $src/devices/system/cpu not found; is $src a sysfs?" >&2; exit 1; }

# copy REL: copies one file; a missing file is an error (discovery would fail on it too).
# cat, not cp: sysfs attributes claim a size of 4096 bytes whatever they hold.
copy() {
  mkdir -p "$dest/$(dirname "$1")"
  cat "$src/$1" >"$dest/$1"
}
# copy_opt REL: copies a file that older kernels or some caches lack.
copy_opt() {
  if [ -e "$src/$1" ]; then copy "$1"; fi
}
# expand LIST: prints the numbers of a kernel list such as 0-3,8 one per line.
expand() {
  local IFS=, r
  for r in $1; do
    case $r in
      *-*) seq "${r%-*}" "${r#*-}" ;;
      ?*) echo "$r" ;;
    esac
  done
}

cpu=devices/system/cpu
for f in online offline possible present isolated; do copy "$cpu/$f"; done
online=$(expand "$(cat "$src/$cpu/online")")
# Discovery reads the caches of an L3 group's lowest online CPU only; the CPUs its shared_cpu_list
# names are placed by it. Track them the same way.
declare -A is_online placed
for n in $online; do is_online[$n]=1; done
for n in $online; do
  d=$cpu/cpu$n
  copy "$d/topology/physical_package_id"
  copy_opt "$d/topology/die_id"
  copy "$d/topology/core_id"
  copy "$d/topology/thread_siblings_list"
  [ -z "${placed[$n]:-}" ] || continue
  i=0
  while [ -d "$src/$d/cache/index$i" ]; do
    c=$d/cache/index$i
    copy "$c/level"
    if [ "$(cat "$src/$c/level")" = 3 ]; then
      copy "$c/type"
      if [ "$(cat "$src/$c/type")" != Instruction ]; then
        copy "$c/shared_cpu_list"
        copy_opt "$c/size"
        copy_opt "$c/id"
        for m in $(expand "$(cat "$src/$c/shared_cpu_list")"); do
          if [ -n "${is_online[$m]:-}" ]; then placed[$m]=1; fi
        done
      fi
    fi
    i=$((i + 1))
  done
done

# ReadHardware reads every cache instance once: a CPU's indexM unless a lower CPU's indexM listed
# it in shared_cpu_list.
declare -A covered
for n in $online; do
  i=0
  while [ -d "$src/$cpu/cpu$n/cache/index$i" ]; do
    if [ -z "${covered[$i:$n]:-}" ]; then
      c=$cpu/cpu$n/cache/index$i
      for f in level type shared_cpu_list; do copy "$c/$f"; done
      copy_opt "$c/size"
      for m in $(expand "$(cat "$src/$c/shared_cpu_list")"); do covered[$i:$m]=1; done
    fi
    i=$((i + 1))
  done
done

# PCI devices: every class, and the rest of the network, GPU, accelerator and storage devices
# (classes 0x02, 0x03, 0x12, 0x01) with their network interfaces' state.
pci=bus/pci/devices
if [ -d "$src/$pci" ]; then
  for p in "$src/$pci"/*; do
    [ -e "$p" ] || continue
    a=$pci/${p##*/}
    copy "$a/class"
    case $(cat "$src/$a/class") in
      0x01*|0x02*|0x03*|0x12*) ;;
      *) continue ;;
    esac
    for f in vendor device numa_node; do copy "$a/$f"; done
    for nd in "$src/$a/net" "$src/$a"/virtio*/net; do
      [ -d "$nd" ] || continue
      for i in "$nd"/*; do copy "${i#"$src/"}/operstate"; done
    done
  done
fi

node=devices/system/node
if [ -d "$src/$node" ]; then
  for f in online possible has_cpu has_memory; do copy "$node/$f"; done
  for n in $(expand "$(cat "$src/$node/online")"); do
    for f in cpulist meminfo distance; do copy "$node/node$n/$f"; done
  done
elif [ -d "$src/devices/system/memory" ]; then
  mem=devices/system/memory
  copy "$mem/block_size_bytes"
  for b in "$src/$mem"/memory[0-9]*; do
    [ -e "$b" ] && copy "$mem/${b##*/}/online"
  done
fi

echo "captured $(find "$dest" -type f | wc -l) files from $src into $dest" >&2
echo "please send it with the output of: lscpu; lscpu -p=CPU,CORE,SOCKET,NODE,CACHE; uname -r" >&2
