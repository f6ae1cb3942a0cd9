#!/bin/sh
# Builds HPCC 1.5.0 against MPICH and OpenBLAS inside the build stage's chroot; hack/images/mpi.sh
# runs it there with this directory's files in /build and takes /build/out/hpcc out. The source
# is the orig tarball of Debian's hpcc source package, fetched from the mirror apt uses and checked
# against the hash in the signed Sources index. Debian's own patches are not applied: by the
# package's changelog they add Debian's make settings (Make.finegrain does that here) and port
# HPCC to Open MPI 4, which dropped MPI-1 calls that MPICH 4 still has.
set -eu
version=1.5.0
cd /build

# 1. apt prints each file of the source package as: 'URI' NAME SIZE SHA256:HASH
line=$(apt-get source --print-uris hpcc | grep "/hpcc_${version}.orig.tar.gz'") || {
	echo "hpcc-mpich: Debian's hpcc source package has no hpcc_${version}.orig.tar.gz; apt offers:" >&2
	apt-get source --print-uris hpcc >&2
	exit 1
}
set -- $line
uri=$(echo "$1" | tr -d "'")
/usr/lib/apt/apt-helper download-file "$uri" "/build/$2" "$4"

# 2. Unpack and build with Make.finegrain (mpicc.mpich, -lopenblas).
tar -xzf "/build/$2"
cp /build/Make.finegrain "hpcc-${version}/hpl/Make.finegrain"
make -C "hpcc-${version}" -j"$(nproc)" arch=finegrain >/build/make.log 2>&1 || {
	tail -n 40 /build/make.log >&2
	echo "hpcc-mpich: make of HPCC ${version} failed (last lines above)" >&2
	exit 1
}
install -D -m 0755 "hpcc-${version}/hpcc" /build/out/hpcc
