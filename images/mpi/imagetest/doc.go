// Package imagetest proves localhost/finegrain-mpi:dev without a Kubernetes cluster: its tests
// unpack the built image and run two MPI workers and a launcher from it, each in its own mount
// and PID namespace on an overlay of the image's root file system, all three in a network
// namespace of their own whose only traffic is local. They need root and the archive (a path
// relative to the repository's root, or absolute), and skip otherwise:
//
//	FINEGRAIN_MPI_IMAGE=_output/images/mpi.tar go test -count=1 -v ./images/mpi/imagetest
//
// The package holds only tests; it is not imported.
package imagetest
