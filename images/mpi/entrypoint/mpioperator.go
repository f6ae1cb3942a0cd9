package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// MPI Operator (github.com/kubeflow/mpi-operator, MPIJob v2beta1) can run this image too. It marks
// its launcher with K_MPI_JOB_ROLE=launcher, mounts the job's key Secret read-only at ~/.ssh
// (id_rsa, id_rsa.pub, authorized_keys; no client configuration) and gives Open MPI its own ssh
// options in OMPI_MCA_plm_rsh_args ("-o ConnectionAttempts=10"), which override the image's
// defaults. The workers' host keys are made when they start (worker.go), so no known_hosts file
// can hold them, and ssh could not record one in the read-only ~/.ssh: without more options every
// connection fails with "Host key verification failed". The placer's own launchers get the same
// options from the job's client configuration (pkg/mpi.SSHConfig); here they are added to what MPI
// Operator set, for its launcher only.
const (
	envMPIOperatorRole  = "K_MPI_JOB_ROLE"
	mpiOperatorLauncher = "launcher"
	envOpenMPIRshArgs   = "OMPI_MCA_plm_rsh_args"
	// workerHostKeyOptions accept a worker's fresh host key without recording it, never prompt,
	// and keep ssh's warnings out of the job's output.
	workerHostKeyOptions = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes"
)

// For an MPIJob with mpiImplementation MPICH, MPI Operator (v0.7.0) names the hostfile in
// HYDRA_HOST_FILE, which only its MPICH launchers get, and writes its ssh options to
// HYDRA_LAUNCH_EXTRA_ARGS, a name MPICH's mpiexec.hydra does not read: MPICH 4.0.2 takes extra
// launcher arguments from HYDRA_LAUNCHER_EXTRA_ARGS only. Such a launcher also does not set
// FINEGRAIN_MPI_IMPLEMENTATION, so the image's mpirun wrapper would start Open MPI, which ignores
// Hydra's hostfile and runs every rank in the launcher.
const (
	envHydraHostFile     = "HYDRA_HOST_FILE"
	envOperatorHydraArgs = "HYDRA_LAUNCH_EXTRA_ARGS"
	envHydraLauncherArgs = "HYDRA_LAUNCHER_EXTRA_ARGS"
)

// commandEnv is the environment the command runs with: env itself, except in MPI Operator's
// launcher. There Open MPI's ssh options (OMPI_MCA_plm_rsh_args, when set) also accept the
// workers' host keys; and in an MPICH launcher (HYDRA_HOST_FILE set) Hydra's ssh options,
// HYDRA_LAUNCHER_EXTRA_ARGS, are the launcher's own HYDRA_LAUNCHER_EXTRA_ARGS when its template
// set them, else MPI Operator's HYDRA_LAUNCH_EXTRA_ARGS, followed by the same host-key options,
// and FINEGRAIN_MPI_IMPLEMENTATION is MPICH unless the template named an MPI.
func commandEnv(env []string) []string {
	if v, _ := lookupEnv(env, envMPIOperatorRole); v != mpiOperatorLauncher {
		return env
	}
	out := make([]string, len(env))
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, envOpenMPIRshArgs+"="); ok {
			kv = envOpenMPIRshArgs + "=" + strings.TrimSpace(v+" "+workerHostKeyOptions)
		}
		out[i] = kv
	}
	if v, _ := lookupEnv(env, envHydraHostFile); v == "" {
		return out
	}
	args, ok := lookupEnv(env, envHydraLauncherArgs)
	if !ok {
		args, _ = lookupEnv(env, envOperatorHydraArgs)
	}
	out = setEnv(out, envHydraLauncherArgs, strings.TrimSpace(args+" "+workerHostKeyOptions))
	if v, _ := lookupEnv(env, envImplementation); v == "" {
		out = setEnv(out, envImplementation, string(MPICH))
	}
	return out
}

// lookupEnv returns the value of the first entry of env named key, as os.Getenv does, and whether
// there is one.
func lookupEnv(env []string, key string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// setEnv gives key the value v in env: every entry of that name is replaced, or one is appended
// when there is none. env is changed in place.
func setEnv(env []string, key, v string) []string {
	found := false
	for i, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			env[i], found = key+"="+v, true
		}
	}
	if !found {
		env = append(env, key+"="+v)
	}
	return env
}

// MPI Operator starts its launcher together with the workers (launcherCreationPolicy AtStartup,
// its default and the only policy under which a gang of launcher and workers can be placed at
// once), and its hostfile names the workers by their DNS names under the job's headless Service,
// which exist only once each worker runs and is ready. ssh does not retry a name that does not
// resolve, so an early mpirun fails ("Could not resolve hostname") and the launcher restarts with
// the kubelet's back-off. The launcher therefore waits, up to hostfileWait, until every name of
// its hostfile resolves.
const (
	hostfileWait     = time.Minute
	hostfileInterval = 250 * time.Millisecond
)

// hostfileEnv are the variables in which MPI Operator names the hostfile, one per MPI.
var hostfileEnv = []string{"OMPI_MCA_orte_default_hostfile", "HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE"}

// hostfileNames returns the host names of a hostfile in Open MPI's ("name slots=N") or Hydra's
// ("name:N") format, in order, without comments and blank lines.
func hostfileNames(data string) []string {
	var names []string
	for _, line := range strings.Split(data, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name, _, _ := strings.Cut(fields[0], ":")
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// waitForHostfile waits, in MPI Operator's launcher only, until every name of its hostfile
// resolves through lookup, trying every interval until ctx ends, and in an MPICH launcher its own
// name too (launcherName of its host name host). It reports the first wait on log. A launcher without a hostfile has
// nothing to wait for; the error says which names did not resolve, or why the hostfile could not
// be read.
func waitForHostfile(ctx context.Context, getenv func(string) string, host string, lookup func(context.Context, string) ([]string, error), interval time.Duration, log io.Writer) error {
	if getenv(envMPIOperatorRole) != mpiOperatorLauncher {
		return nil
	}
	var path string
	for _, v := range hostfileEnv {
		if path = getenv(v); path != "" {
			break
		}
	}
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the hostfile MPI Operator named: %w", err)
	}
	pending := hostfileNames(string(data))
	if getenv(envHydraHostFile) == path {
		if name := launcherName(pending, host); name != "" {
			pending = append(pending, name)
		}
	}
	for said := false; ; said = true {
		var left []string
		for _, name := range pending {
			if _, err := lookup(ctx, name); err != nil {
				left = append(left, name)
			}
		}
		if pending = left; len(pending) == 0 {
			return nil
		}
		if !said {
			fmt.Fprintf(log, "mpi-entrypoint: waiting for the names of %s to resolve (the job's pods are starting): %s\n", path, strings.Join(pending, " "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("names of %s still do not resolve: %s (%w); running the command anyway", path, strings.Join(pending, " "), context.Cause(ctx))
		case <-time.After(interval):
		}
	}
}

// launcherName is the name by which an MPICH launcher of MPI Operator waits for itself. Hydra's
// proxies on the workers call the launcher back by its host name (the pod's hostname,
// <job>-launcher), which they resolve through the search domain MPI Operator gives them,
// <job>.<namespace>.svc.<cluster domain>: only once the launcher is ready and in the job's
// Service, possibly after mpiexec has started them. The launcher's own /etc/hosts has its full
// name from the start, so it asks for the name the way its hostfile spells the workers',
// <host>.<job>.<namespace>.svc (the domain of the first worker's name), which /etc/hosts does not
// hold and the cluster's DNS answers through the pod's search list. It is empty without a host
// name or a dotted first name.
func launcherName(workers []string, host string) string {
	if host == "" || len(workers) == 0 {
		return ""
	}
	if _, domain, ok := strings.Cut(workers[0], "."); ok && domain != "" {
		return host + "." + domain
	}
	return ""
}

// waitForLauncherHostfile is waitForHostfile through the system's resolver for at most
// hostfileWait. A signal that stops a container (SIGTERM on pod deletion, SIGINT, SIGHUP,
// SIGQUIT) ends the wait and the process at once with the status a shell reports, 128+N: as the
// container's PID 1 without a handler, the process would never see it.
func waitForLauncherHostfile(getenv func(string) string) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := (<-sigs).(syscall.Signal); ok {
			os.Exit(128 + int(s))
		}
	}()
	ctx, cancel := context.WithTimeoutCause(context.Background(), hostfileWait, fmt.Errorf("waited %v", hostfileWait))
	defer cancel()
	host, _ := os.Hostname() // the name Hydra gives its proxies; without one there is none to wait for
	return waitForHostfile(ctx, getenv, host, net.DefaultResolver.LookupHost, hostfileInterval, os.Stderr)
}
