# The nodes of a local cluster of several nodes (NODES=2..9): sourced by lib.sh, not run. The
# control plane (etcd, kube-apiserver, CoreDNS, kube-controller-manager, kube-scheduler) runs on
# the host as with one node; each node node-<i> is a containerd and a kubelet that share
#   - a network namespace, finegrain-node-<i> (ip netns), joined to the host by a veth pair on
#     the bridge $NODES_BRIDGE: the node's address is $NODES_NET_PREFIX.<10+i>/24, the host's
#     $NODES_HOST_IP (the API server and CoreDNS listen there), and its pods get addresses of
#     $POD_NET_PREFIX.<i>.0/24 from the CNI bridge and host-local plugins. Every address is in
#     the range reserved for benchmarks (198.18.0.0/15, RFC 2544), never a private RFC 1918 one,
#     nor a documentation range: machines of this kind use those themselves (eth0 on 192.0.2.0/24,
#     the Go module proxy and the Debian mirror answering on 203.0.113.80), and a bridge on one of
#     them would cut the host off from them while the nodes are up. A node namespace routes the other nodes' pod ranges
#     to those nodes and has no default route, so nothing leaves the namespaces this file makes;
#     only the node namespaces forward (the host neither forwards nor translates addresses: it is
#     an end point, with a route to each node's pods);
#   - a mount namespace, persisted at $MNTNS_DIR/<node>, in which a directory of the node's own
#     is mounted on every path a kubelet or containerd uses: the cluster's kubelet root,
#     containerd root and state, NRI socket directory, pod logs, CNI configuration and node agent
#     state, and the paths they write outside them (OUTSIDE_PATHS: device-plugin socket, log
#     links, shim sockets, CNI cache). So every node sees the paths a single-node cluster uses,
#     the configurations and the DaemonSet's host paths are the same for every node, and a
#     kubelet's pod volume mounts stay visible to its containerd's runc;
#   - a cgroup subtree $NODES_CGROUP/<node> in every hierarchy: the kubelet's --cgroup-root, so
#     its pods live under it; the node agent gets the same value (--cgroup-root=$NODES_CGROUP/
#     $(NODE_NAME), hack/cluster/overlay-nodes) and manages that subtree only.
# Every node offers the host's CPUs: each agent pins real cpusets from all of them, keeping its
# own invariants (no CPU exclusive to two containers of its node, a shared pool of at least
# --min-shared-cpus), while workers of different nodes may share a CPU (hack/cluster/README.md).

# 198.18.0.0/15 (RFC 2544): the host and the nodes on 198.19.0.0/24, node i's pods on
# 198.18.i.0/24.
NODES_NET_PREFIX=198.19.0
NODES_HOST_IP=198.19.0.1
POD_NET_PREFIX=198.18
NODES_BRIDGE=finegrain0
NODES_CGROUP=finegrain-nodes
NODES_DIR="$CLUSTER_DIR/nodes"
NODES_RUN_DIR="$RUN_DIR/nodes"
MNTNS_DIR="$RUN_DIR/mntns"
MAX_NODES=9

# node_names N: the names of N nodes.
node_names() {
  local i
  for ((i = 1; i <= $1; i++)); do echo "node-$i"; done
}

node_index() { echo "${1#node-}"; }
node_dir() { echo "$NODES_DIR/$1"; }
node_run_dir() { echo "$NODES_RUN_DIR/$1"; }
node_netns() { echo "finegrain-$1"; }
node_ip() { echo "$NODES_NET_PREFIX.$((10 + $(node_index "$1")))"; }
node_pod_cidr() { echo "$POD_NET_PREFIX.$(node_index "$1").0/24"; }
node_cgroup_root() { echo "$NODES_CGROUP/$1"; }
# The host's end of the node's veth pair (the node's end is its eth0).
node_veth() { echo "fg-$1"; }

# node_enter NODE: the command prefix that runs a command in the node's network and mount
# namespaces (`$(node_enter node-1) ip addr`). nsenter, not `ip netns exec`, which would mount a
# sysfs of its own over /sys and hide the cgroup hierarchies.
node_enter() {
  echo nsenter --mount="$MNTNS_DIR/$1" --net="/run/netns/$(node_netns "$1")" --
}

# nodes_network_up NODE...: the bridge with the host's address, and per node its network
# namespace, veth pair, address and routes.
nodes_network_up() {
  local n m
  ip link add "$NODES_BRIDGE" type bridge ||
    die "could not create the bridge $NODES_BRIDGE (ip link add); make cluster-down removes a leftover one"
  ip addr add "$NODES_HOST_IP/24" dev "$NODES_BRIDGE"
  ip link set "$NODES_BRIDGE" up
  for n in "$@"; do
    ip netns add "$(node_netns "$n")" ||
      die "could not create the network namespace $(node_netns "$n"); make cluster-down removes a leftover one"
    ip link add "$(node_veth "$n")" type veth peer name eth0 netns "$(node_netns "$n")"
    ip link set "$(node_veth "$n")" master "$NODES_BRIDGE" up
    ip -n "$(node_netns "$n")" link set lo up
    ip -n "$(node_netns "$n")" addr add "$(node_ip "$n")/24" dev eth0
    ip -n "$(node_netns "$n")" link set eth0 up
    # The node forwards between its pods and the bridge (the CNI bridge plugin would switch it on
    # at the first pod anyway); the host reaches the node's pods through it.
    nsenter --net="/run/netns/$(node_netns "$n")" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'
    ip route add "$(node_pod_cidr "$n")" via "$(node_ip "$n")" dev "$NODES_BRIDGE"
  done
  for n in "$@"; do
    for m in "$@"; do
      [ "$m" = "$n" ] || ip -n "$(node_netns "$n")" route add "$(node_pod_cidr "$m")" via "$(node_ip "$m")" dev eth0
    done
  done
}

# check_nodes_network: nothing on this machine may use the addresses the nodes get.
check_nodes_network() {
  local used
  used="$(ip -4 -o addr show to "$NODES_NET_PREFIX.0/24"; ip -4 -o addr show to "$POD_NET_PREFIX.0.0/15"
    ip -4 route show table all root "$NODES_NET_PREFIX.0/24"; ip -4 route show table all root "$POD_NET_PREFIX.0.0/15")"
  [ -z "$used" ] ||
    die "this machine already uses addresses of $NODES_NET_PREFIX.0/24 or $POD_NET_PREFIX.0.0/15, which the nodes need: $(echo "$used" | tr -s ' \n' ' '); run make cluster-down, or remove them"
  local link
  for link in "$NODES_BRIDGE" $(node_names "$MAX_NODES" | while read -r n; do node_veth "$n"; done); do
    ! ip link show "$link" >/dev/null 2>&1 ||
      die "a link named $link exists; make cluster-down removes the one a previous cluster left"
  done
}

# cgroup_mounts: the mount points of the cgroup hierarchies (v1 controllers, named and unified
# ones, or the one v2 tree).
cgroup_mounts() {
  # The file system type follows the "-" that ends a line's optional fields.
  awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup" || $(i + 1) == "cgroup2") print $5; break } }' \
    /proc/self/mountinfo | sort -u
}

# node_cgroups_up NODE: the node's cgroup subtree (the kubelet's --cgroup-root) in every
# hierarchy. A new v1 cpuset cgroup starts with no CPUs and no memory nodes: each level gets its
# parent's. On v2 each level passes the controllers on to its children.
node_cgroups_up() {
  local n="$1" mnt dir f
  for mnt in $(cgroup_mounts); do
    for dir in "$mnt/$NODES_CGROUP" "$mnt/$(node_cgroup_root "$n")"; do
      [ -d "$dir" ] || mkdir "$dir" || die "could not create the cgroup $dir"
      for f in cpuset.cpus cpuset.mems; do
        [ ! -f "$dir/$f" ] || [ -n "$(cat "$dir/$f")" ] || cat "$(dirname "$dir")/$f" >"$dir/$f"
      done
      if [ -f "$dir/cgroup.subtree_control" ]; then
        for f in $(cat "$(dirname "$dir")/cgroup.subtree_control"); do
          echo "+$f" >"$dir/cgroup.subtree_control" 2>/dev/null || true
        done
      fi
    done
  done
}

# node_binds NODE: "SOURCE TARGET" per line, the node's directories and where its mount
# namespace mounts them.
node_binds() {
  local d r
  d="$(node_dir "$1")" r="$(node_run_dir "$1")"
  cat <<EOF
$d/kubelet $KUBELET_ROOT
$d/containerd $CLUSTER_DIR/containerd
$d/pod-logs $CLUSTER_DIR/pod-logs
$d/cni-conf $CLUSTER_DIR/cni/net.d
$d/nodeagent $CLUSTER_DIR/nodeagent
$r/containerd $RUN_DIR/containerd
$r/nri $RUN_DIR/nri
$d/outside/var-lib-kubelet /var/lib/kubelet
$d/outside/var-log-containers /var/log/containers
$d/outside/var-lib-cni /var/lib/cni
$r/outside/run-containerd /run/containerd
EOF
}

# node_mount_ns_up NODE: the node's mount namespace, a private copy of the host's with the
# node's directories mounted (node_binds), persisted at $MNTNS_DIR/NODE so the daemons enter it
# with node_enter. A namespace file may only be mounted on a private mount: $MNTNS_DIR is made one.
# The node's mounts are shared, as on a host whose init is systemd, so that containers can mount
# the kubelet's root with HostToContainer propagation: containerd refuses that from a private
# mount, and the kubelet's own remedy (its root bound on itself, shared) stacks a second mount
# that containerd 1.6 does not look at.
node_mount_ns_up() {
  local n="$1" src dst
  mkdir -p "$MNTNS_DIR"
  if ! mountpoint -q "$MNTNS_DIR"; then
    mount --bind "$MNTNS_DIR" "$MNTNS_DIR"
    mount --make-private "$MNTNS_DIR"
  fi
  while read -r src dst; do mkdir -p "$src" "$dst"; done < <(node_binds "$n")
  touch "$MNTNS_DIR/$n"
  unshare --mount="$MNTNS_DIR/$n" --propagation private -- sh -c '
    while read -r src dst; do mount --bind "$src" "$dst" && mount --make-rshared "$dst" || exit 1; done' < <(node_binds "$n") ||
    die "could not make the mount namespace of node $n (unshare, mount --bind)"
}

# nodes_down: remove what nodes_network_up, node_mount_ns_up and node_cgroups_up made, including
# what a cluster that stopped uncleanly left; its processes must be gone. Deleting a network
# namespace deletes the veth pair in it, the bridge takes the host's routes to the pods with it.
nodes_down() {
  local ns f link
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^finegrain-node-[0-9]+$/ { print $1 }'); do
    ip netns del "$ns" || die "could not delete the network namespace $ns (ip netns del)"
  done
  # A namespace outlives its name while a process (a leftover shim) is in it: its veth pair goes
  # with the host's end.
  for link in $(node_names "$MAX_NODES" | while read -r n; do node_veth "$n"; done); do
    ! ip link show "$link" >/dev/null 2>&1 || ip link del "$link" || die "could not delete the link $link (ip link del)"
  done
  if ip link show "$NODES_BRIDGE" >/dev/null 2>&1; then
    ip link del "$NODES_BRIDGE" || die "could not delete the bridge $NODES_BRIDGE (ip link del)"
  fi
  for f in "$MNTNS_DIR"/*; do
    [ -e "$f" ] || continue
    ! mountpoint -q "$f" || umount "$f" || die "could not unmount the mount namespace $f"
  done
}

# The rest is up.sh's: starting the nodes' daemons (start_daemon, $KUBE_BIN, $NODE_LIST).

node_ctr() {
  ctr --address "$(node_run_dir "$1")/containerd/containerd.sock" --namespace k8s.io "${@:2}"
}

# start_nodes: with several nodes, each node's cgroups, mount namespace and containerd, the
# images imported into all of them at once, then the kubelets.
start_nodes() {
  local n
  for n in "${NODE_LIST[@]}"; do
    node_cgroups_up "$n"
    node_mount_ns_up "$n"
    log "starting containerd of node $n"
    start_daemon "containerd-$n" $(node_enter "$n") containerd --config "$CLUSTER_DIR/containerd.toml"
  done
  for n in "${NODE_LIST[@]}"; do
    wait_for "containerd of node $n" 30 "containerd-$n" node_ctr "$n" version
  done
  log "importing images into ${NODE_LIST[*]}"
  import_images_all || die "could not import the images into every node's containerd (see above)"
  for n in "${NODE_LIST[@]}"; do
    node_ctr "$n" images check "name==$PAUSE_IMAGE" | grep -q complete ||
      die "the pause image $PAUSE_IMAGE is not in the containerd of node $n after the import"
    start_kubelet "$n"
  done
  for n in "${NODE_LIST[@]}"; do wait_kubelet "$n"; done
}

# start_kubelet NODE: one node's kubelet (of several), in the node's namespaces.
start_kubelet() {
  log "starting kubelet of node $1 (cpu-manager-policy $KUBELET_CPU_POLICY, cgroup root /$(node_cgroup_root "$1"), address $(node_ip "$1"))"
  start_daemon "kubelet-$1" $(node_enter "$1") "$KUBE_BIN/kubelet" \
    --config "$(node_dir "$1")/kubelet.yaml" \
    --kubeconfig "$CLUSTER_DIR/kubelet-$1.kubeconfig" \
    --root-dir "$KUBELET_ROOT" \
    --hostname-override "$1" --node-ip "$(node_ip "$1")" --v=1
}

wait_kubelet() {
  wait_for "node $1 Ready" 90 "kubelet-$1" node_ready "$1"
  wait_for "the not-ready taint to leave node $1" 60 kube-controller-manager node_untainted "$1"
}

# node_list FUNC: FUNC's value for each node, space-separated.
node_list() {
  local n out=()
  for n in "${NODE_LIST[@]}"; do out+=("$("$1" "$n")"); done
  echo "${out[*]}"
}
kubelet_url_of() { echo "https://$(node_ip "$1"):10250"; }
kubelet_root_of() { echo "$(node_dir "$1")/kubelet"; }
kubelet_log_of() { echo "$LOG_DIR/kubelet-$1.log"; }
containerd_sock_of() { echo "$(node_run_dir "$1")/containerd/containerd.sock"; }
cgroup_root_of() { echo "/$(node_cgroup_root "$1")"; }

# restart_kubelets: on a cluster of several nodes whose control plane and containerds run, start
# the kubelets that stopped (the e2e suite kills one); they take up their nodes' running
# containers. Fails, starting nothing, when anything else is missing.
restart_kubelets() {
  local d n stopped=()
  [ "$NODES" -gt 1 ] && [ "$(cluster_setting NODES)" = "$NODES" ] || return 1
  for d in "${CONTROL_DAEMONS[@]}"; do daemon_pid "$d" >/dev/null || return 1; done
  for n in "${NODE_LIST[@]}"; do
    daemon_pid "containerd-$n" >/dev/null || return 1
    daemon_pid "kubelet-$n" >/dev/null || stopped+=("$n")
  done
  [ ${#stopped[@]} -gt 0 ] && curl_api /readyz >/dev/null || return 1
  check_running_settings
  for n in "${stopped[@]}"; do start_kubelet "$n"; done
  for n in "${stopped[@]}"; do wait_kubelet "$n"; done
  print_summary "up again: started the kubelet of ${stopped[*]}"
}
