package mpi

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// File names in the job's ConfigMap and in the SSH mount.
const (
	// HostfileKey is the hostfile's key in the job's ConfigMap.
	HostfileKey = "hostfile"
	// SSHConfigKey is the SSH client configuration's key in the job's ConfigMap; it is mounted
	// as "config" in the SSH directory.
	SSHConfigKey = "ssh_config"
	// IdentityFile, PublicKeyFile, AuthorizedKeysFile and ClientConfigFile are the file names
	// in the SSH directory (spec.sshAuthMountPath).
	IdentityFile       = "id_ed25519"
	PublicKeyFile      = "id_ed25519.pub"
	AuthorizedKeysFile = "authorized_keys"
	ClientConfigFile   = "config"
	// DefaultSSHPort is where a worker's sshd listens on a pod network.
	DefaultSSHPort = 22
)

// Environment variables the placer sets.
const (
	// EnvHostfile names the hostfile in the launcher.
	EnvHostfile = "FINEGRAIN_HOSTFILE"
	// EnvImplementation is the job's spec.mpiImplementation, in the launcher and the workers
	// (the MPI image's mpirun picks the implementation by it).
	EnvImplementation = "FINEGRAIN_MPI_IMPLEMENTATION"
	// EnvSSHPort is the port a worker's sshd listens on.
	EnvSSHPort = "FINEGRAIN_SSH_PORT"
	// EnvSSHDir is spec.sshAuthMountPath, where sshd finds authorized_keys.
	EnvSSHDir = "FINEGRAIN_SSH_AUTH_DIR"
)

// Host is one worker as the launcher reaches it.
type Host struct {
	// Name is the worker's DNS name as the hostfile gives it.
	Name string
	// Slots is the number of MPI ranks it runs.
	Slots int
	// Port is its sshd's port; 0 means DefaultSSHPort.
	Port int32
}

// Hostfile is the hostfile of impl: one line per host in rank order, "name slots=N" for Open MPI
// and "name:N" for MPICH's Hydra.
func Hostfile(impl v1alpha1.MPIImplementation, hosts []Host) string {
	var b strings.Builder
	for _, h := range hosts {
		if impl == v1alpha1.MPICH {
			fmt.Fprintf(&b, "%s:%d\n", h.Name, h.Slots)
		} else {
			fmt.Fprintf(&b, "%s slots=%d\n", h.Name, h.Slots)
		}
	}
	return b.String()
}

// SSHConfig is the SSH client configuration of a job whose workers are reached under the
// headless Service service in namespace: for the job's own workers (and only them) it turns off
// host-key prompts and known-hosts files (their host keys are made at start) and names the job's
// identity; a host with its own port gets a block that sets it. Plain `ssh <worker name>` and
// both MPI launchers then work without flags.
func SSHConfig(service, namespace, sshDir string, hosts []Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# SSH client configuration of the workers of one finegrain HPCJob, written by the placer.\n")
	for _, h := range hosts {
		if h.Port == 0 || h.Port == DefaultSSHPort {
			continue
		}
		short, _, _ := strings.Cut(h.Name, ".")
		fmt.Fprintf(&b, "Host %s %s.%s\n    Port %d\n", h.Name, short, service, h.Port)
	}
	// The workers' names under the job's headless Service, in every form a resolver accepts.
	fmt.Fprintf(&b, "Host *.%[1]s *.%[1]s.%[2]s *.%[1]s.%[2]s.svc *.%[1]s.%[2]s.svc.*\n", service, namespace)
	fmt.Fprintf(&b, "    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    LogLevel ERROR\n")
	fmt.Fprintf(&b, "    IdentityFile %s\n    IdentitiesOnly yes\n    BatchMode yes\n", path.Join(sshDir, IdentityFile))
	return b.String()
}

// sshArgs are the options every MPI launcher passes to ssh: the job's client configuration
// (also when sshDir is not the user's ~/.ssh) and retries while a worker's name starts to
// resolve.
func sshArgs(sshDir string) string {
	return "-F " + path.Join(sshDir, ClientConfigFile) + " -o ConnectionAttempts=10"
}

// PodInterface is the network interface of a pod on a pod network: the CRI runtimes name it so.
const PodInterface = "eth0"

// LauncherEnv is the environment that makes a bare mpirun of impl use the hostfile at
// hostfilePath and the SSH configuration in sshDir, starting one rank per hostfile slot. On a
// pod network (podNetwork), MPICH's Hydra tells its proxies on the workers to call it back at the
// address of the pod's interface rather than by its host name, which only the pod itself
// resolves.
func LauncherEnv(impl v1alpha1.MPIImplementation, hostfilePath, sshDir string, podNetwork bool) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvHostfile, Value: hostfilePath},
		{Name: EnvImplementation, Value: string(impl)},
	}
	if impl == v1alpha1.MPICH {
		env = append(env,
			corev1.EnvVar{Name: "HYDRA_HOST_FILE", Value: hostfilePath},
			corev1.EnvVar{Name: "HYDRA_LAUNCHER", Value: "ssh"},
			corev1.EnvVar{Name: "HYDRA_LAUNCHER_EXTRA_ARGS", Value: sshArgs(sshDir)})
		if podNetwork {
			env = append(env, corev1.EnvVar{Name: "HYDRA_IFACE", Value: PodInterface})
		}
		return env
	}
	return append(env,
		corev1.EnvVar{Name: "OMPI_MCA_orte_default_hostfile", Value: hostfilePath},
		corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_args", Value: sshArgs(sshDir)},
		corev1.EnvVar{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"})
}

// WorkerEnv is what a worker's MPI image reads at start: its sshd's port, the SSH directory and
// the implementation.
func WorkerEnv(impl v1alpha1.MPIImplementation, sshDir string, port int32) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvImplementation, Value: string(impl)},
		{Name: EnvSSHPort, Value: fmt.Sprint(port)},
		{Name: EnvSSHDir, Value: sshDir},
	}
}
