// Command podlister lists the pods of a namespace through the in-cluster configuration (service
// account token, CA and KUBERNETES_SERVICE_HOST/PORT) and prints one "pod NAME" line each. The
// e2e suite runs it inside a pod to prove that service-account tokens, RBAC and the local
// cluster's API address work from a container. With -resolve it looks names up instead, through
// the container's /etc/resolv.conf (nameservers, search path, ndots) as any program in the pod
// would, and prints one "addr NAME ADDRESS" line per address: the suite's proof that the cluster
// DNS answers inside pods. Exit status 0 on success, 1 on any error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

type options struct {
	namespace string
	resolve   string
	timeout   time.Duration
}

func main() {
	var opts options
	fl := flag.NewFlagSet("podlister", flag.ExitOnError)
	fl.StringVar(&opts.namespace, "namespace", "", "namespace to list (default: the pod's own)")
	fl.StringVar(&opts.resolve, "resolve", "", "comma-separated names to look up instead of listing pods")
	fl.DurationVar(&opts.timeout, "timeout", 30*time.Second, "give up after this long")
	_ = fl.Parse(os.Args[1:])
	run := listPods
	if opts.resolve != "" {
		run = resolve
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "podlister:", err)
		os.Exit(1)
	}
}

func listPods(opts options) error {
	ns := opts.namespace
	if ns == "" {
		data, err := os.ReadFile(namespaceFile)
		if err != nil {
			return fmt.Errorf("read the pod's namespace (no -namespace given): %w", err)
		}
		ns = strings.TrimSpace(string(data))
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods in namespace %s at %s: %w", ns, cfg.Host, err)
	}
	for _, p := range pods.Items {
		fmt.Println("pod", p.Name)
	}
	return nil
}

// resolve looks up every name with Go's own resolver, which reads /etc/resolv.conf as glibc does
// (the binary is static), and prints what each resolved to. Every name is tried; the error names
// each one that failed.
func resolve(opts options) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	resolver := &net.Resolver{PreferGo: true}
	var errs []error
	for _, name := range strings.Split(opts.resolve, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		addrs, err := resolver.LookupHost(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("look up %s: %w", name, err))
			continue
		}
		for _, a := range addrs {
			fmt.Println("addr", name, a)
		}
	}
	return errors.Join(errs...)
}
