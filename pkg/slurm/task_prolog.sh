# The body of finegrain's TaskProlog (slurm.TaskProlog prepends the shebang and the settings
# slurmd_pid_file and timeout_cs). slurmstepd forks each task of a step, runs this script from
# the forked task and execs the user's program only once the script has exited 0. The script
# waits until the node agent has moved the task into its job's placeholder cgroup, so that no
# user code runs on the node's shared pool (docs/slurm.md, "Confinement", step 4).
#
# Confined means: the task's cpuset cgroup (the cpuset line of /proc/<pid>/cgroup on cgroup v1,
# the unified line on v2) is no longer slurmd's, and the task's Cpus_allowed_list is no longer
# slurmd's either (the kernel resets the affinity when the move completes; a placeholder's pinned
# CPUs are never in the shared pool that slurmd runs on). Everything is read from /proc, which
# the job's user may read; nothing here chooses where the task goes.
#
# Not confined after timeout_cs hundredths of a second (no placeholder on this node, an agent
# that cannot move the task): the script exits 1, and slurmstepd does not start the task (the
# step fails: "TaskProlog failed status=1"). It says why in a "print" line on its standard output,
# which slurmstepd writes to the task's output (slurm-<id>.out of a batch job, srun's terminal);
# its standard error goes nowhere.

# The job's environment is the user's: the programs this script runs are the system's.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

# The task: this script's parent, which execs the user's program once the script exits 0.
task=$PPID

# cgroup_of PID sets cg to the process's cpuset cgroup; it fails when the process is gone.
cgroup_of() {
	cg=
	[ -r "/proc/$1/cgroup" ] || return 1
	unified=
	while IFS=: read -r _ controllers path; do
		case ",$controllers," in
		*,cpuset,*)
			cg=$path
			return 0
			;;
		,,) unified=$path ;;
		esac
	done <"/proc/$1/cgroup"
	cg=$unified
	[ -n "$cg" ]
}

# cpus_of PID sets cpus to the process's Cpus_allowed_list; it fails when the process is gone.
cpus_of() {
	cpus=
	[ -r "/proc/$1/status" ] || return 1
	while IFS=': 	' read -r key value; do
		if [ "$key" = Cpus_allowed_list ]; then
			cpus=$value
			return 0
		fi
	done <"/proc/$1/status"
	return 1
}

# now_cs sets now to the time since boot in hundredths of a second.
now_cs() {
	read -r up _ </proc/uptime
	now=$((${up%.*} * 100 + 1${up#*.} - 100))
}

fail() {
	echo "print finegrain TaskProlog: task $task of job ${SLURM_JOB_ID:-?} step ${SLURM_STEP_ID:-batch} on node ${SLURMD_NODENAME:-?}: $*; the task is not started (docs/slurm.md, \"Confinement\")"
	exit 1
}

now_cs
deadline=$((now + timeout_cs))
while :; do
	slurmd=
	read -r slurmd <"$slurmd_pid_file" 2>/dev/null
	cgroup_of "$slurmd" || fail "cannot find slurmd: no running process named by $slurmd_pid_file"
	slurmd_cg=$cg
	cpus_of "$slurmd" || fail "cannot read slurmd's Cpus_allowed_list"
	slurmd_cpus=$cpus
	cgroup_of "$task" || fail "the task is gone"
	cpus_of "$task" || fail "the task is gone"
	if [ "$cg" != "$slurmd_cg" ] && [ "$cpus" != "$slurmd_cpus" ]; then
		exit 0
	fi
	now_cs
	if [ "$now" -ge "$deadline" ]; then
		fail "not confined to its job's placeholder within $((timeout_cs / 100)).$((timeout_cs / 10 % 10)) s: its cpuset cgroup is $cg and its CPUs $cpus, slurmd's are $slurmd_cg and $slurmd_cpus (the shared pool); either the job has no pinned placeholder on this node or the node agent cannot move the task (moving one that holds capabilities takes CAP_SYS_NICE)"
	fi
	sleep 0.05
done
