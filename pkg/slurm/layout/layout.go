// Package layout is the contract between the virtual cluster controller (pkg/slurm,
// pkg/placer/vcluster), which generates Slurm's configuration and the pods of a virtual cluster,
// and the image's entrypoint (images/mpi/entrypoint), which starts munged, slurmctld, slurmd and
// sshd in them: the paths, ConfigMap and Secret keys and environment variables both sides use.
// It holds names only, no logic, and imports nothing beyond the standard library so that the
// static entrypoint stays small.
package layout

// The Slurm configuration directory: the ConfigMap of a virtual cluster is mounted there, and
// Slurm looks for cgroup.conf and job_submit.lua beside slurm.conf.
const (
	ConfDir = "/etc/slurm"
	// The ConfigMap's keys, each a file of ConfDir.
	SlurmConfKey    = "slurm.conf"
	CgroupConfKey   = "cgroup.conf"
	JobSubmitLuaKey = "job_submit.lua"
	// TaskPrologKey is finegrain's TaskProlog (slurm.TaskProlog), mounted executable.
	TaskPrologKey = "task_prolog"
	// SSHConfigKey is the ssh client configuration (the virtual cluster's sshd port, its
	// identity); mounted as /root/.ssh/config.
	SSHConfigKey = "ssh_config"
)

// SlurmConf is the path of slurm.conf in the pods (SLURM_CONF points at it too), TaskProlog that
// of the TaskProlog, and SlurmdPIDFile slurmd's PID file, by which the TaskProlog finds slurmd.
const (
	SlurmConf     = ConfDir + "/" + SlurmConfKey
	TaskProlog    = ConfDir + "/" + TaskPrologKey
	SlurmdPIDFile = "/run/slurmd.pid"
)

// SSHDir is root's ssh directory in the pods: the virtual cluster's identity, authorized key and
// client configuration (SSHConfigKey) are mounted there.
const SSHDir = "/root/.ssh"

// The munge key: the Secret's key, and the directory the Secret is mounted at. The entrypoint
// copies the key to MungeKeyFile, owned by the munge user with mode 0400 as munged demands.
const (
	MungeKeySecretKey = "munge.key"
	MungeKeyMountDir  = "/etc/finegrain/munge"
	MungeRunDir       = "/run/munge"
	MungeKeyFile      = MungeRunDir + "/munge.key"
	MungeSocket       = MungeRunDir + "/munge.socket.2"
)

// Directories of the Slurm daemons, on an emptyDir volume mounted at SpoolDir; the entrypoint
// creates them before starting the daemons.
const (
	SpoolDir          = "/var/spool/slurm"
	StateSaveLocation = SpoolDir + "/ctld"
	SlurmdSpoolDir    = SpoolDir + "/d"
)

// Environment of a virtual cluster's pods.
const (
	// EnvRole is RoleSlurmctld or RoleSlurmd: which daemons the entrypoint starts.
	EnvRole = "FINEGRAIN_SLURM_ROLE"
	// EnvNodeName is the node's name in Slurm (slurmd -N); the controller sets it to the
	// Kubernetes node's name.
	EnvNodeName = "FINEGRAIN_SLURM_NODE_NAME"
	// EnvSlurmConf is Slurm's own variable naming slurm.conf.
	EnvSlurmConf = "SLURM_CONF"
)

// Roles, as LabelRole on the pods says them too.
const (
	RoleSlurmctld = "slurmctld"
	RoleSlurmd    = "slurmd"
)
