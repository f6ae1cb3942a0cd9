package main

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// The environment variables of the image's contract (images/mpi/README.md). The placer sets them
// in the pods it creates.
const (
	envSSHPort        = "FINEGRAIN_SSH_PORT"
	envSSHAuthDir     = "FINEGRAIN_SSH_AUTH_DIR"
	envImplementation = "FINEGRAIN_MPI_IMPLEMENTATION"
)

// Defaults when a variable is unset or empty.
const (
	defaultSSHPort    = 22
	defaultSSHAuthDir = "/root/.ssh"
)

// Implementation names an MPI library of the image, as FINEGRAIN_MPI_IMPLEMENTATION spells it.
type Implementation string

// The MPI libraries of the image; the mpirun wrapper picks Open MPI when none is named.
const (
	OpenMPI Implementation = "OpenMPI"
	MPICH   Implementation = "MPICH"
)

// workerConfig is what a worker's sshd is made from.
type workerConfig struct {
	// Port is the TCP port sshd listens on.
	Port int
	// AuthDir holds authorized_keys (the job's public key), mounted read-only by the placer
	// together with the job's key pair and ssh client config.
	AuthDir string
}

// parseWorkerEnv reads the worker's settings from the environment.
func parseWorkerEnv(getenv func(string) string) (workerConfig, error) {
	cfg := workerConfig{Port: defaultSSHPort, AuthDir: defaultSSHAuthDir}
	if v := getenv(envSSHPort); v != "" {
		port, err := strconv.ParseUint(v, 10, 16)
		if err != nil || port == 0 {
			return workerConfig{}, fmt.Errorf("%s=%q is not a TCP port number (1-65535): set it to the port this worker's sshd listens on, or leave it unset for %d", envSSHPort, v, defaultSSHPort)
		}
		cfg.Port = int(port)
	}
	if v := getenv(envSSHAuthDir); v != "" {
		// sshd_config splits AuthorizedKeysFile at white space and expands %-tokens in it; a
		// quote would end the value early.
		if !path.IsAbs(v) || strings.ContainsAny(v, " \t\n\"%") {
			return workerConfig{}, fmt.Errorf("%s=%q must be an absolute directory path without spaces, quotes or %%: set it to where the job's SSH secret is mounted, or leave it unset for %s", envSSHAuthDir, v, defaultSSHAuthDir)
		}
		cfg.AuthDir = path.Clean(v)
	}
	return cfg, nil
}

// parseImplementation reads FINEGRAIN_MPI_IMPLEMENTATION; unset means Open MPI, as in the mpirun
// wrapper.
func parseImplementation(getenv func(string) string) (Implementation, error) {
	switch v := Implementation(getenv(envImplementation)); v {
	case "", OpenMPI:
		return OpenMPI, nil
	case MPICH:
		return MPICH, nil
	default:
		return "", fmt.Errorf("%s=%q names no MPI of this image: set it to %s or %s, or leave it unset for %s", envImplementation, string(v), OpenMPI, MPICH, OpenMPI)
	}
}
