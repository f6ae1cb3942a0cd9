//go:build e2e

// The local cluster's DNS (CoreDNS, started by hack/cluster/up.sh): the names an HPCJob's
// hostfile lists, <worker>.<job>-workers.<ns>.svc, resolve inside hostNetwork pods with
// dnsPolicy ClusterFirstWithHostNet through the headless Service, not-ready workers included.
package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/test/e2e/framework"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dnsRecordTimeout bounds the wait for a new pod's record: the EndpointSlice controller writes
// the slice about a second after the pod has its address, and CoreDNS's cache keeps a denial
// 5 s at most.
const dnsRecordTimeout = 30 * time.Second

func TestClusterDNS(t *testing.T) {
	c := framework.Setup(t)
	server, domain := c.Env["CLUSTER_DNS"], c.Env["CLUSTER_DOMAIN"]
	if server == "" || domain == "" {
		t.Fatalf("cluster.env in %s lacks CLUSTER_DNS or CLUSTER_DOMAIN: the cluster was started by a tree without cluster DNS; make cluster-up starts it", c.Dir)
	}
	checkKubeletClusterDNS(t, c, server, domain)
	ns := c.Namespace(t)
	ctx := context.Background()

	// The shape the placer gives an HPCJob's workers (pkg/placer/hpcjob): a headless Service
	// without ports that publishes not-ready addresses, pods with hostname and subdomain.
	const job = "dnsjob"
	svcName := job + "-workers"
	selector := map[string]string{"finegrain.dev/e2e-dns-job": job}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector,
			PublishNotReadyAddresses: true,
		},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create headless service %s/%s: %v", ns, svcName, err)
	}
	// worker-0 is ready; worker-1's readiness probe never passes, and its name must resolve all
	// the same (mpirun reaches workers while they start).
	workers := []string{job + "-worker-0", job + "-worker-1"}
	for i, name := range workers {
		pod := framework.Pod(name, framework.Container("worker", framework.WorkerImage))
		pod.Labels = selector
		pod.Spec.Hostname, pod.Spec.Subdomain = name, svcName
		if i == 1 {
			pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/never-ready"}}},
				PeriodSeconds: 1,
			}
		}
		c.CreatePod(t, ns, pod)
	}
	var podIP string
	for _, name := range workers {
		pod := c.WaitForPod(t, ns, name, "running", framework.PodStartTimeout, framework.Running)
		if podIP != "" && pod.Status.PodIP != podIP {
			t.Fatalf("pods %s and %s have addresses %s and %s: want both the host's", workers[0], name, podIP, pod.Status.PodIP)
		}
		podIP = pod.Status.PodIP
	}
	if pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, workers[1], metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if podReady(pod) {
		t.Fatalf("pod %s/%s is ready; its readiness probe should always fail", ns, workers[1])
	}

	fqdn := func(w string) string { return w + "." + svcName + "." + ns + ".svc." + domain }
	framework.Eventually(t, "CoreDNS at "+server+" to answer for "+strings.Join(workers, " and "), dnsRecordTimeout, func(ctx context.Context) error {
		for _, w := range workers {
			addrs, err := lookupAt(ctx, server, fqdn(w)+".")
			if err != nil {
				return err
			}
			if !slices.Equal(addrs, []string{podIP}) {
				return fmt.Errorf("%s resolves to %v, want [%s]", fqdn(w), addrs, podIP)
			}
		}
		return nil
	})

	// It answers for the cluster's names only: anything else is refused, never forwarded.
	for _, name := range []string{"example.org.", "localhost."} {
		if rcode, err := queryRcode(server, name); err != nil {
			t.Fatal(err)
		} else if rcode != rcodeRefused {
			t.Errorf("CoreDNS at %s answered %s with RCODE %d, want %d (REFUSED): it must serve only %s", server, name, rcode, rcodeRefused, domain)
		}
	}

	// Inside a pod: the names as the hostfile writes them (<host>.<svc>.<ns>.svc), fully
	// qualified, and the short <host>.<svc> through the search path the kubelet writes into the
	// pod's resolv.conf.
	var names []string
	for _, w := range workers {
		names = append(names, w+"."+svcName+"."+ns+".svc", fqdn(w), w+"."+svcName)
	}
	resolver := framework.Pod("resolver", framework.Container("resolve", framework.WorkerImage,
		"/usr/local/bin/podlister", "-resolve", strings.Join(names, ","), "-timeout", "20s"))
	resolver.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	c.CreatePod(t, ns, resolver)
	done := c.WaitForPod(t, ns, resolver.Name, "completed", framework.PodStartTimeout, framework.Completed)
	logs, err := c.PodLogs(ctx, ns, resolver.Name, "resolve")
	if err != nil {
		t.Fatal(err)
	}
	if state := done.Status.ContainerStatuses[0].State.Terminated; state == nil || state.ExitCode != 0 {
		t.Fatalf("podlister -resolve in pod %s/%s failed (%+v):\n%s", ns, resolver.Name, state, logs)
	}
	for _, name := range names {
		if want := "addr " + name + " " + podIP; !strings.Contains(logs, want+"\n") {
			t.Errorf("inside pod %s/%s, %s did not resolve to %s; podlister printed:\n%s", ns, resolver.Name, name, podIP, logs)
		}
	}
}

// checkKubeletClusterDNS fails the test unless the running kubelet points pods at server.
func checkKubeletClusterDNS(t *testing.T, c *framework.Cluster, server, domain string) {
	t.Helper()
	data, err := c.KubeletGet(context.Background(), "/configz")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Config struct {
			ClusterDNS    []string `json:"clusterDNS"`
			ClusterDomain string   `json:"clusterDomain"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("configz of the kubelet on node %s: %v", c.NodeName, err)
	}
	if !slices.Equal(body.Config.ClusterDNS, []string{server}) || body.Config.ClusterDomain != domain {
		t.Fatalf("the kubelet runs with clusterDNS %v and clusterDomain %q; cluster.env says %s and %s (make cluster-down && make cluster-up)", body.Config.ClusterDNS, body.Config.ClusterDomain, server, domain)
	}
}

// lookupAt resolves a fully qualified name with Go's resolver sending every query to server.
func lookupAt(ctx context.Context, server, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(server, "53"))
	}}
	addrs, err := r.LookupHost(ctx, name)
	// A DNSError names the host's nameserver from /etc/resolv.conf, which Dial never reached.
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return nil, fmt.Errorf("look up %s at %s: %s", name, server, dnsErr.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s at %s: %w", name, server, err)
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}

const rcodeRefused = 5

// queryRcode sends one A query for name (fully qualified) over UDP to server and returns the
// answer's RCODE, which Go's resolver does not expose (it reports REFUSED and SERVFAIL alike).
func queryRcode(server, name string) (int, error) {
	const id = 0xf9a1
	msg := binary.BigEndian.AppendUint16(nil, id)
	msg = append(msg, 0x01, 0x00) // a standard query, recursion desired
	msg = append(msg, 0, 1, 0, 0, 0, 0, 0, 0)
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0, 0, 1, 0, 1) // root label, type A, class IN
	conn, err := net.Dial("udp", net.JoinHostPort(server, "53"))
	if err != nil {
		return 0, fmt.Errorf("query %s at %s: %w", name, server, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return 0, err
	}
	if _, err := conn.Write(msg); err != nil {
		return 0, fmt.Errorf("query %s at %s: %w", name, server, err)
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		return 0, fmt.Errorf("answer to %s from %s: %w", name, server, err)
	}
	if n < 12 || binary.BigEndian.Uint16(buf) != id || buf[2]&0x80 == 0 {
		return 0, errors.New("answer to " + name + " from " + server + " is not a DNS response to the query")
	}
	return int(buf[3] & 0x0f), nil
}
