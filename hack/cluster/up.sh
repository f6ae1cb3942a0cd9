#!/usr/bin/env bash
# Brings up the local Kubernetes cluster: etcd, kube-apiserver, the cluster DNS (CoreDNS from
# hack/coredns, on $CLUSTER_DNS:53), kube-controller-manager, kube-scheduler, and per node a
# containerd (Debian's 1.6, or 2.x with NRI) and a kubelet, with the images from hack/images
# imported. One node (the default): everything on loopback. Several (NODES=3): the control plane
# on the host, each node in network, mount and cgroup namespaces of its own, pods on a pod network
# (hack/cluster/nodes.sh, hack/cluster/README.md). Idempotent: a healthy cluster is left as it
# is; one whose nodes lost only kubelets gets them started again; a broken one, or one lacking a
# daemon this tree starts (one brought up by an older tree), is torn down and started afresh.
#
# Environment:
#   NODES                1 (default): one node, the host; 2..9: nodes node-1..node-N, each with its
#                        own kubelet, containerd, network and mount namespace and cgroup root
#   KUBELET_CPU_POLICY   none (default; finegrain's agent pins) or static (the kubelet pins,
#                        reservedSystemCPUs "0"; the baseline finegrain is compared with)
#   CONTAINERD           1 (default: Debian's containerd 1.6; the agent pins through inotify) or 2
#                        (containerd v2.4.2 built by hack/cluster/containerd2.sh, NRI socket
#                        $RUN_DIR/nri/nri.sock; the agent pins at container creation)
#   NRI_FAIL_CLOSED      with CONTAINERD=2: 1 (default) makes containerd refuse containers while
#                        the agent's NRI plugin is absent (default validator + required_plugins),
#                        except in pods annotated tolerate-missing-plugins.finegrain.dev: "true";
#                        0 lets them start unpinned (NRI's own default)
#   NODE_NAME            with NODES=1, the node's name (default: the host name, which must
#                        resolve to 127.0.0.1)
#   FINEGRAIN_CLUSTER_DIR, FINEGRAIN_CLUSTER_RUN_DIR   state directories (see lib.sh)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
start_time=$SECONDS

KUBELET_CPU_POLICY="${KUBELET_CPU_POLICY:-none}"
case "$KUBELET_CPU_POLICY" in
  none) KUBELET_RESERVED_CPUS="" ;;
  static) KUBELET_RESERVED_CPUS="0" ;;
  *) die "KUBELET_CPU_POLICY=$KUBELET_CPU_POLICY: use none (default) or static" ;;
esac
NODES="${NODES:-1}"
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] && [ "$NODES" -le "$MAX_NODES" ] ||
  die "NODES=$NODES: use 1 (one node, the host; default) to $MAX_NODES"
if [ "$NODES" = 1 ]; then
  NODE_NAME="${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}"
  NODE_LIST=("$NODE_NAME")
  API_HOST=127.0.0.1
  DNS_BIND="$CLUSTER_DNS"
  POD_DNS="$CLUSTER_DNS"
  OVERLAY=hack/cluster/overlay
else
  mapfile -t NODE_LIST < <(node_names "$NODES")
  NODE_NAME="${NODE_LIST[0]}"
  # The nodes and their pods reach the API server and the cluster DNS on the host's bridge
  # address; the API server listens there only, CoreDNS on its loopback address too.
  API_HOST="$NODES_HOST_IP"
  DNS_BIND="$CLUSTER_DNS $NODES_HOST_IP"
  POD_DNS="$NODES_HOST_IP"
  OVERLAY=hack/cluster/overlay-nodes
fi
CONTAINERD="${CONTAINERD:-1}"
NRI_FAIL_CLOSED="${NRI_FAIL_CLOSED:-1}"
case "$CONTAINERD:$NRI_FAIL_CLOSED" in
  1:*) NRI_SOCK="" ;;
  2:0 | 2:1) NRI_SOCK="$RUN_DIR/nri/nri.sock" ;;
  2:*) die "NRI_FAIL_CLOSED=$NRI_FAIL_CLOSED: use 1 (default) or 0" ;;
  *) die "CONTAINERD=$CONTAINERD: use 1 (Debian's containerd 1.6, default) or 2 (containerd 2.x with NRI)" ;;
esac

preflight() {
  need_root
  need_cmd etcd etcd-server
  if [ "$CONTAINERD" = 1 ]; then
    need_cmd containerd containerd
    need_cmd ctr containerd
    need_cmd containerd-shim-runc-v2 containerd
  elif compgen -G "/etc/containerd/conf.d/*.toml" >/dev/null; then
    die "/etc/containerd/conf.d holds drop-ins, which containerd 2 always imports: they would change the cluster's runtime; move them away or use CONTAINERD=1"
  fi
  need_cmd runc runc
  need_cmd openssl openssl
  need_cmd envsubst gettext-base
  need_cmd curl curl
  need_cmd ss iproute2
  need_cmd flock util-linux
  need_cmd setsid util-linux
  need_cmd go "golang (Go 1.26 in /usr/local/go/bin on PATH)"
  local plugin
  for plugin in loopback bridge host-local; do
    [ -x "/usr/lib/cni/$plugin" ] || die "/usr/lib/cni/$plugin is missing: install the Debian package containernetworking-plugins"
  done
  if [ "$NODES" -gt 1 ]; then
    need_cmd ip iproute2
    need_cmd nsenter util-linux
    need_cmd unshare util-linux
    need_cmd mountpoint util-linux
  else
    [[ "$NODE_NAME" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] ||
      die "node name '$NODE_NAME' is not a valid DNS name; set NODE_NAME"
    local addr
    addr="$(getent ahostsv4 "$NODE_NAME" | awk 'NR == 1 { print $1 }' || true)"
    [[ "$addr" == 127.* ]] ||
      die "node name '$NODE_NAME' resolves to '${addr:-nothing}', not 127.0.0.1: the API server reaches the kubelet by it; add '127.0.0.1 $NODE_NAME' to /etc/hosts or set NODE_NAME to a name that does"
  fi
  [ -d /sys/fs/cgroup/cpuset ] || [ -e /sys/fs/cgroup/cgroup.controllers ] ||
    die "no cpuset cgroup hierarchy under /sys/fs/cgroup: the kubelet needs cgroup v1 with cpuset or cgroup v2"
}

check_ports() {
  local port owner ports=(2379 2380 "$API_PORT" 10257 10259)
  # Several nodes' kubelets listen in their own network namespaces.
  [ "$NODES" -gt 1 ] || ports+=(10250 10248)
  for port in "${ports[@]}"; do
    owner="$(ss -Htlnp "sport = :$port" 2>/dev/null | head -n 1)"
    [ -z "$owner" ] || die "port $port, which the cluster needs on $API_HOST, is in use: $owner"
  done
  # The cluster DNS clashes only with sockets on its own addresses or on a wildcard one: port 53
  # on 127.0.0.53 (systemd-resolved) or on the LAN address of a local resolver is no obstacle.
  for port in 53 "$CLUSTER_DNS_HEALTH_PORT" "$CLUSTER_DNS_READY_PORT"; do
    owner="$(ss -Htulnp "sport = :$port" 2>/dev/null |
      awk -v ours=" $DNS_BIND " '{ a = $5; sub(/:[0-9]+$/, "", a); sub(/%.*/, "", a)
        if (index(ours, " " a " ") || a == "0.0.0.0" || a == "*" || a == "[::]") { print; exit } }')"
    [ -z "$owner" ] || die "port $port, which the cluster DNS needs on $DNS_BIND, is taken: $owner"
  done
  [ "$NODES" = 1 ] || check_nodes_network
}

# issue NAME CN ORG USAGE [SANS]: a key and a certificate signed by the cluster CA.
issue() {
  local name="$1" cn="$2" org="$3" usage="$4" sans="${5:-}" ext="$PKI/$1.ext"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $usage"
    [ -z "$sans" ] || echo "subjectAltName = $sans"
  } >"$ext"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "${org:+/O=$org}/CN=$cn" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days 365 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null || die "openssl could not issue the $name certificate"
  rm -f "$PKI/$name.csr" "$ext"
}

make_pki() {
  log "creating certificates in $PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=finegrain-local-ca" -days 3650 -out "$PKI/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
    die "openssl could not create the cluster CA"
  issue kube-apiserver kube-apiserver "" serverAuth \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:$NODE_NAME,IP:127.0.0.1,IP:${SERVICE_CIDR%.0/*}.1,IP:$NODES_HOST_IP"
  issue apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
  issue admin finegrain-admin system:masters clientAuth
  issue kube-controller-manager system:kube-controller-manager "" clientAuth
  issue kube-scheduler system:kube-scheduler "" clientAuth
  issue coredns system:coredns "" clientAuth
  # The API server's identity towards aggregated API servers (metrics-server in make
  # bench-dc-objective): they trust the user it names in X-Remote-User only from this certificate.
  issue front-proxy-client front-proxy-client "" clientAuth
  if [ "$NODES" = 1 ]; then
    issue kubelet "system:node:$NODE_NAME" system:nodes clientAuth
    issue kubelet-serving "$NODE_NAME" "" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1"
  else
    local n
    for n in "${NODE_LIST[@]}"; do
      issue "kubelet-$n" "system:node:$n" system:nodes clientAuth
      issue "kubelet-serving-$n" "$n" "" serverAuth "DNS:$n,IP:$(node_ip "$n")"
    done
  fi
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/service-account.key" 2>/dev/null
  openssl pkey -in "$PKI/service-account.key" -pubout -out "$PKI/service-account.pub" 2>/dev/null ||
    die "openssl could not create the service-account key pair"
}

render() {
  envsubst <"$FG_ROOT/hack/cluster/config/$1" >"$2"
}

# write_configs: kubeconfigs, containerd's and CoreDNS's configuration, and per node the
# kubelet's (and with several nodes the pod network's). With several nodes, containerd's is the
# same for every node: each sees its own directories at the paths it names (nodes.sh).
write_configs() {
  local user n plugin
  export CLUSTER_DIR RUN_DIR PKI API_HOST API_PORT CONTAINERD_SOCK PAUSE_IMAGE KUBELET_CPU_POLICY KUBELET_RESERVED_CPUS
  export SERVICE_CIDR CLUSTER_DNS DNS_BIND POD_DNS CLUSTER_DOMAIN CLUSTER_DNS_HEALTH_PORT CLUSTER_DNS_READY_PORT
  export CONTAINERD_BIN NRI_SOCK NRI_VALIDATOR=false NRI_REQUIRED_PLUGINS=""
  export KUBELET_ADDRESS KUBELET_SERVING KUBELET_CGROUP_ROOT NODE_POD_CIDR
  if [ "$NRI_FAIL_CLOSED" = 1 ]; then
    NRI_VALIDATOR=true NRI_REQUIRED_PLUGINS='"finegrain"'
  fi
  for user in admin kube-controller-manager kube-scheduler coredns; do
    KUBECONFIG_USER="$user" render kubeconfig.tmpl "$CLUSTER_DIR/$user.kubeconfig"
  done
  mkdir -p "$CLUSTER_DIR/cni/net.d" "$CLUSTER_DIR/cni/bin" "$RUN_DIR/containerd" "$KUBELET_ROOT" "$CLUSTER_DIR/pod-logs"
  for plugin in loopback bridge host-local; do ln -sf "/usr/lib/cni/$plugin" "$CLUSTER_DIR/cni/bin/$plugin"; done
  if [ "$CONTAINERD" = 2 ]; then
    render containerd2.toml.tmpl "$CLUSTER_DIR/containerd.toml"
  else
    render containerd.toml.tmpl "$CLUSTER_DIR/containerd.toml"
  fi
  render Corefile.tmpl "$CLUSTER_DIR/Corefile"
  if [ "$NODES" = 1 ]; then
    cp "$FG_ROOT/hack/cluster/config/loopback.conflist" "$CLUSTER_DIR/cni/net.d/10-loopback.conflist"
    KUBECONFIG_USER=kubelet render kubeconfig.tmpl "$CLUSTER_DIR/kubelet.kubeconfig"
    KUBELET_ADDRESS=127.0.0.1 KUBELET_SERVING=kubelet-serving KUBELET_CGROUP_ROOT=/
    render kubelet.yaml.tmpl "$CLUSTER_DIR/kubelet.yaml"
    return 0
  fi
  for n in "${NODE_LIST[@]}"; do
    mkdir -p "$(node_dir "$n")/cni-conf"
    KUBECONFIG_USER="kubelet-$n" render kubeconfig.tmpl "$CLUSTER_DIR/kubelet-$n.kubeconfig"
    KUBELET_ADDRESS="$(node_ip "$n")" KUBELET_SERVING="kubelet-serving-$n" KUBELET_CGROUP_ROOT="/$(node_cgroup_root "$n")"
    NODE_POD_CIDR="$(node_pod_cidr "$n")"
    render kubelet.yaml.tmpl "$(node_dir "$n")/kubelet.yaml"
    render pods.conflist.tmpl "$(node_dir "$n")/cni-conf/10-pods.conflist"
  done
}

# record_outside_paths: remember which paths outside the cluster directories existed before, so
# down.sh removes only what this cluster created.
record_outside_paths() {
  local p
  : >"$CLUSTER_DIR/preexisting"
  for p in "${OUTSIDE_PATHS[@]}"; do
    [ ! -e "$p" ] || echo "$p" >>"$CLUSTER_DIR/preexisting"
  done
}

curl_api() {
  curl -sf --noproxy '*' --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://$API_HOST:$API_PORT$1"
}

# apply_dns_rbac: what CoreDNS's identity may read; kubectl apply leaves it as it is when nothing
# changed.
apply_dns_rbac() {
  "$KUBE_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" apply -f "$FG_ROOT/hack/cluster/config/coredns-rbac.yaml" >/dev/null ||
    die "kubectl could not apply hack/cluster/config/coredns-rbac.yaml (CoreDNS's permissions)"
}

start_control_plane() {
  log "starting etcd"
  start_daemon etcd etcd --name finegrain --data-dir "$CLUSTER_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster finegrain=http://127.0.0.1:2380 --logger zap --log-outputs stderr --log-level warn
  wait_for "etcd health" 30 etcd curl -sf http://127.0.0.1:2379/health

  log "starting kube-apiserver on $API_HOST:$API_PORT"
  # It reaches a single node's kubelet by the node's name, which resolves to 127.0.0.1 (the
  # kubelet refuses to report a loopback address); several nodes' kubelets by their addresses.
  local kubelet_address=Hostname
  [ "$NODES" = 1 ] || kubelet_address=InternalIP
  start_daemon kube-apiserver "$KUBE_BIN/kube-apiserver" \
    --bind-address "$API_HOST" --secure-port "$API_PORT" \
    --etcd-servers http://127.0.0.1:2379 \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --endpoint-reconciler-type none \
    --client-ca-file "$PKI/ca.crt" \
    --tls-cert-file "$PKI/kube-apiserver.crt" --tls-private-key-file "$PKI/kube-apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types "$kubelet_address" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/service-account.pub" \
    --service-account-signing-key-file "$PKI/service-account.key" \
    --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction \
    --requestheader-client-ca-file "$PKI/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
    --allow-privileged=true --anonymous-auth=false --profiling=false --v=1
  wait_for "kube-apiserver /readyz" 90 kube-apiserver curl_api /readyz

  # Its permissions first, or its first lists would be refused and retried after a back-off.
  log "starting coredns on $CLUSTER_DNS:53"
  apply_dns_rbac
  start_daemon coredns "$COREDNS_BIN/coredns" -conf "$CLUSTER_DIR/Corefile"

  local common=(--bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1) nodes=()
  # A node whose kubelet stopped is marked unreachable after 20 s instead of 50 s, so the pods it
  # held are evicted (after their tolerationSeconds) while a test waits.
  [ "$NODES" = 1 ] || nodes=(--node-monitor-grace-period 20s)
  log "starting kube-controller-manager and kube-scheduler"
  start_daemon kube-controller-manager "$KUBE_BIN/kube-controller-manager" "${common[@]}" "${nodes[@]}" \
    --kubeconfig "$CLUSTER_DIR/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$CLUSTER_DIR/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$CLUSTER_DIR/kube-controller-manager.kubeconfig" \
    --service-account-private-key-file "$PKI/service-account.key" \
    --root-ca-file "$PKI/ca.crt" --use-service-account-credentials=true \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR"
  start_daemon kube-scheduler "$KUBE_BIN/kube-scheduler" "${common[@]}" \
    --kubeconfig "$CLUSTER_DIR/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$CLUSTER_DIR/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$CLUSTER_DIR/kube-scheduler.kubeconfig"
  wait_for "coredns /ready" 30 coredns dns_ready
}

start_node() {
  log "starting containerd"
  start_daemon containerd containerd --config "$CLUSTER_DIR/containerd.toml"
  wait_for "containerd" 30 containerd ctr_k8s version
  log "importing images"
  import_images
  ctr_k8s images check "name==$PAUSE_IMAGE" | grep -q complete ||
    die "the pause image $PAUSE_IMAGE is not in the cluster's containerd after the import"

  log "starting kubelet (cpu-manager-policy $KUBELET_CPU_POLICY)"
  start_daemon kubelet "$KUBE_BIN/kubelet" \
    --config "$CLUSTER_DIR/kubelet.yaml" \
    --kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" \
    --root-dir "$KUBELET_ROOT" \
    --hostname-override "$NODE_NAME" --v=1
  wait_for "node $NODE_NAME Ready" 90 kubelet node_ready "$NODE_NAME"
  # The node lifecycle controller removes the not-ready taint shortly after Ready.
  wait_for "the not-ready taint to leave node $NODE_NAME" 60 kube-controller-manager node_untainted "$NODE_NAME"
}

node_ready() {
  [ "$("$KUBE_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" get node "$1" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

node_untainted() {
  ! "$KUBE_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" get node "$1" \
    -o 'jsonpath={.spec.taints[*].key}' | grep -q node.kubernetes.io/not-ready
}

# write_cluster_env: the settings the scripts and the e2e framework read. KUBELET_ROOT,
# KUBELET_URL and CONTAINERD_SOCK are the first node's; the NODE_* lists hold every node's.
write_cluster_env() {
  local kubelet_root="$KUBELET_ROOT" kubelet_url=https://127.0.0.1:10250 sock="$CONTAINERD_SOCK"
  if [ "$NODES" -gt 1 ]; then
    kubelet_root="$(kubelet_root_of "$NODE_NAME")" kubelet_url="$(kubelet_url_of "$NODE_NAME")"
    sock="$(containerd_sock_of "$NODE_NAME")"
  fi
  cat >"$CLUSTER_ENV" <<EOF
# Written by hack/cluster/up.sh; read by test/e2e/framework and hack/cluster/*.sh.
CLUSTER_DIR=$CLUSTER_DIR
KUBECONFIG=$ADMIN_KUBECONFIG
KUBE_BIN=$KUBE_BIN
KUBECTL=$KUBE_BIN/kubectl
NODE_NAME=$NODE_NAME
KUBELET_CPU_POLICY=$KUBELET_CPU_POLICY
KUBELET_RESERVED_CPUS=$KUBELET_RESERVED_CPUS
CONTAINERD=$CONTAINERD
CONTAINERD_BIN=$CONTAINERD_BIN
NRI_SOCK=$NRI_SOCK
NRI_FAIL_CLOSED=$NRI_FAIL_CLOSED
KUBELET_ROOT=$kubelet_root
LOG_DIR=$LOG_DIR
CONTAINERD_SOCK=$sock
API_SERVER=https://$API_HOST:$API_PORT
KUBELET_URL=$kubelet_url
CLUSTER_DNS=$CLUSTER_DNS
CLUSTER_DOMAIN=$CLUSTER_DOMAIN
COREDNS_BIN=$COREDNS_BIN
OVERLAY=$OVERLAY
POD_DNS=$POD_DNS
PID_DIR=$PID_DIR
NODES=$NODES
EOF
  if [ "$NODES" = 1 ]; then
    cat >>"$CLUSTER_ENV" <<EOF
NODE_NAMES=$NODE_NAME
NODE_IPS=127.0.0.1
NODE_KUBELET_URLS=$kubelet_url
NODE_KUBELET_ROOTS=$kubelet_root
NODE_KUBELET_LOGS=$LOG_DIR/kubelet.log
NODE_CONTAINERD_SOCKS=$sock
NODE_CGROUP_ROOTS=/
EOF
    return 0
  fi
  cat >>"$CLUSTER_ENV" <<EOF
NODE_NAMES=${NODE_LIST[*]}
NODE_IPS=$(node_list node_ip)
NODE_KUBELET_URLS=$(node_list kubelet_url_of)
NODE_KUBELET_ROOTS=$(node_list kubelet_root_of)
NODE_KUBELET_LOGS=$(node_list kubelet_log_of)
NODE_CONTAINERD_SOCKS=$(node_list containerd_sock_of)
NODE_CGROUP_ROOTS=$(node_list cgroup_root_of)
NODE_POD_CIDRS=$(node_list node_pod_cidr)
NODE_NETNS=$(node_list node_netns)
EOF
}

# print_summary HOW: HOW says how the cluster came to be up.
print_summary() {
  local nodes="node $NODE_NAME" daemons logs="$CLUSTER_DIR/pod-logs"
  daemons="$(cluster_daemons | tr ' ' '\n' | paste -sd, -)"
  if [ "$NODES" -gt 1 ]; then
    nodes="nodes ${NODE_LIST[*]}, pods on $POD_NET_PREFIX.<i>.0/24, API server and DNS on $API_HOST"
    logs="$NODES_DIR/<node>/pod-logs"
  fi
  cat >&2 <<EOF
cluster: $1 ($nodes, kubelet cpu-manager-policy $KUBELET_CPU_POLICY, $(containerd --version | awk '{ print $1, $3 }')${NRI_SOCK:+, NRI $NRI_SOCK})
  kubeconfig: $ADMIN_KUBECONFIG
  kubectl:    $KUBE_BIN/kubectl
  dns:        $POD_DNS:53 ($CLUSTER_DOMAIN$([ "$NODES" -gt 1 ] || echo "; pods with dnsPolicy ClusterFirstWithHostNet"))
  logs:       $LOG_DIR/{$daemons}.log
  pod logs:   $logs
  deploy:     kubectl apply -k $OVERLAY
  use it:     export KUBECONFIG=$ADMIN_KUBECONFIG PATH=$KUBE_BIN:\$PATH
  stop it:    make cluster-down
EOF
}

# check_running_settings: a running cluster must have been brought up with the settings asked for.
check_running_settings() {
  local running
  running="$(cluster_setting KUBELET_CPU_POLICY)"
  [ "$running" = "$KUBELET_CPU_POLICY" ] ||
    die "the cluster is up with kubelet cpu-manager-policy $running, not $KUBELET_CPU_POLICY; run make cluster-down first"
  running="$(cluster_setting CONTAINERD)"
  [ "${running:-1}" = "$CONTAINERD" ] ||
    die "the cluster is up with CONTAINERD=${running:-1}, not $CONTAINERD; run make cluster-down first"
  running="$(cluster_setting NODES)"
  [ "${running:-1}" = "$NODES" ] ||
    die "the cluster is up with NODES=${running:-1}, not $NODES; run make cluster-down first"
  KUBE_BIN="$(cluster_setting KUBE_BIN)"
  COREDNS_BIN="$(cluster_setting COREDNS_BIN)"
  CONTAINERD_BIN="$(cluster_setting CONTAINERD_BIN)"
  [ -z "$CONTAINERD_BIN" ] || PATH="$CONTAINERD_BIN:$PATH"
}

preflight
take_lock
if cluster_up; then
  check_running_settings
  unhealthy=""
  if ! curl_api /readyz >/dev/null; then
    unhealthy="kube-apiserver is not ready"
  elif ! dns_ready >/dev/null; then
    unhealthy="coredns is not ready on $CLUSTER_DNS:$CLUSTER_DNS_READY_PORT"
  else
    for n in "${NODE_LIST[@]}"; do node_ready "$n" || unhealthy="node $n is not Ready"; done
  fi
  if [ -z "$unhealthy" ]; then
    apply_dns_rbac
    log "already up; importing the tree's current images"
    "$FG_ROOT/hack/images/build.sh" || die "could not build the images (hack/images/build.sh)"
    import_images_all || die "could not import the images into the cluster (see above)"
    print_summary "already up"
    exit 0
  fi
  log "the cluster's processes run but it is not healthy ($unhealthy); restarting it"
elif restart_kubelets; then
  exit 0
fi
if [ -e "$CLUSTER_ENV" ] || [ -d "$PID_DIR" ]; then
  # A cluster brought up by an older tree lacks the daemons it did not know (coredns).
  stopped=()
  for d in $(cluster_daemons); do daemon_pid "$d" >/dev/null || stopped+=("$d"); done
  log "cleaning up what a previous cluster left${stopped[*]:+ (not running: ${stopped[*]})}"
  "$FG_ROOT/hack/cluster/down.sh"
fi
check_ports

KUBE_BIN="$(kube_bin)" || die "could not build the Kubernetes binaries (hack/k8s/build.sh)"
COREDNS_BIN="$(coredns_bin)" || die "could not build CoreDNS (hack/coredns/build.sh)"
CONTAINERD_BIN=""
if [ "$CONTAINERD" = 2 ]; then
  CONTAINERD_BIN="$("$FG_ROOT/hack/cluster/containerd2.sh")" || die "could not build containerd 2 (hack/cluster/containerd2.sh)"
  # Its containerd and ctr come first; the shim is named in the configuration.
  PATH="$CONTAINERD_BIN:$PATH"
fi
"$FG_ROOT/hack/images/build.sh" || die "could not build the images (hack/images/build.sh)"

mkdir -p "$CLUSTER_DIR" "$LOG_DIR" "$RUN_DIR"
# A start that fails half-way leaves nothing running; the logs stay for the post-mortem.
trap 'rc=$?; if [ $rc -ne 0 ]; then log "tearing down the half-started cluster (logs stay in $LOG_DIR)"; "$FG_ROOT/hack/cluster/down.sh" || true; fi' EXIT
record_outside_paths
make_pki
write_configs
write_cluster_env
for d in $(cluster_daemons); do : >"$LOG_DIR/$d.log"; done
if [ "$NODES" = 1 ]; then
  start_control_plane
  start_node
else
  # The API server and CoreDNS listen on the bridge's address: the network comes first.
  log "creating the bridge $NODES_BRIDGE and the network namespaces of ${NODE_LIST[*]}"
  nodes_network_up "${NODE_LIST[@]}"
  start_control_plane
  start_nodes
fi
print_summary "up in $((SECONDS - start_time)) s"
