// Package mpi owns what an MPI job needs besides its placement: the job's SSH identity, the
// hostfile in each MPI implementation's format, the SSH client configuration that lets plain ssh
// and both implementations' launchers reach the workers without prompts or flags, the
// environment that makes a bare mpirun use them, and the SSH ports of workers that share their
// node's network. It is pure: it builds values from values and must not call the API server,
// choose nodes (the placer's plan does) or read anything a pod author wrote other than what it is
// handed.
package mpi
