// Package placer runs finegrain's central placer: it connects to the API server, checks that
// the HPCJob and NodeResourceTopology APIs are served, takes a Lease so that one replica leads,
// serves Prometheus metrics and health, and runs the controller, the service objective loop
// (objectives), the virtual cluster controller (vcluster) and the Slurm delegation bridge
// (slurmbridge) while it leads. The placement logic lives in the sub-packages (hpcjob, plan,
// snapshot, queue, controller, objectives, vcluster, slurmbridge);
// this package only wires them to a cluster.
package placer

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
	"github.com/finegrain-dev/finegrain/pkg/placer/objectives"
	"github.com/finegrain-dev/finegrain/pkg/placer/slurmbridge"
	"github.com/finegrain-dev/finegrain/pkg/placer/vcluster"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

// Options configure a placer process.
type Options struct {
	// Kubeconfig is a kubeconfig file; empty means the in-cluster configuration.
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst bound the client's request rate.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// MetricsAddress serves /metrics, /healthz and /readyz; empty disables it.
	MetricsAddress string
	// Profiling also serves Go's profiles under /debug/pprof/ on MetricsAddress.
	Profiling bool
	// LeaderElect takes a Lease before running; LeaseNamespace/LeaseName name it.
	LeaderElect                               bool
	LeaseNamespace, LeaseName                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Controller                                controller.Options
	// Objectives tune the service objective loop.
	Objectives objectives.Options
	// VirtualClusters tune the virtual cluster controller.
	VirtualClusters vcluster.Options
	// SlurmBridge tunes the delegation bridge between virtual clusters' Slurm and the placer.
	SlurmBridge slurmbridge.Options
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "finegrain-system"
	}
	return Options{
		KubeAPIQPS: 500, KubeAPIBurst: 1000,
		MetricsAddress: ":8080",
		LeaderElect:    true, LeaseNamespace: ns, LeaseName: "finegrain-placer",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Controller:      controller.DefaultOptions(),
		Objectives:      objectives.DefaultOptions(),
		VirtualClusters: vcluster.DefaultOptions(),
		SlurmBridge:     slurmbridge.DefaultOptions(),
	}
}

// Run runs the placer until ctx ends or it loses its Lease: it makes its API clients, checks the
// APIs it needs, makes the controller with its event recorder (newController), and runs it —
// under the Lease when leader election is on — beside the metrics server (runLeading).
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	klog.SetSlogLogger(log)
	cfg, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	cfg.UserAgent = "finegrain-placer"
	kube, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return fmt.Errorf("make API client: %w", err)
	}
	// HPCJob and NodeResourceTopology are custom resources, which the API server serves as JSON.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("make dynamic API client: %w", err)
	}
	if err := checkAPIs(kube); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c, recorder, stop, err := newController(ctx, cfg, kube, dyn, reg, log, opts)
	if err != nil {
		return err
	}
	defer stop()
	o, err := objectives.New(kube, dyn, recorder, reg, log, opts.Objectives)
	if err != nil {
		return err
	}
	kubeInformers, dynInformers := c.Informers()
	vc := vcluster.New(kube, dyn, vcluster.Informers{Kube: kubeInformers, Dynamic: dynInformers}, vcluster.NewAPIExecer(cfg, kube), recorder, log, opts.VirtualClusters)
	bridge := slurmbridge.NewLoop(cfg, kube, dyn, log, withSchedulerName(opts.SlurmBridge, opts.Controller.SchedulerName))
	return runLeading(ctx, opts, log, kube, leaderWork{placer: c, side: []sideLoop{o, vc, bridge}}, reg)
}

// withSchedulerName gives the bridge's placeholders the placer's scheduler name.
func withSchedulerName(o slurmbridge.Options, name string) slurmbridge.Options {
	o.SchedulerName = name
	return o
}

// sideLoop is a loop that runs beside the placer's controller while this replica leads (each
// waits for its API where that is not served yet).
type sideLoop interface {
	Run(ctx context.Context) error
	HasSynced() bool
}

// leaderWork is what runs while this replica leads: the placer's controller, the service
// objective loop, the virtual cluster controller and the Slurm delegation bridge.
type leaderWork struct {
	placer *controller.Controller
	side   []sideLoop
}

// Run runs them all until ctx ends or the placer's controller returns, and returns the first
// error.
func (w leaderWork) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sideErr := make(chan error, len(w.side))
	for _, s := range w.side {
		go func() { sideErr <- s.Run(ctx) }()
	}
	err := w.placer.Run(ctx)
	cancel()
	for range w.side {
		if serr := <-sideErr; err == nil {
			err = serr
		}
	}
	return err
}

// HasSynced reports whether every cache of the work has synced.
func (w leaderWork) HasSynced() bool {
	for _, s := range w.side {
		if !s.HasSynced() {
			return false
		}
	}
	return w.placer.HasSynced()
}

// newController makes the controller and the events.k8s.io recorder it writes through, as
// kube-scheduler's: it writes each event as it comes (client-go's core/v1 recorder writes one
// at a time and drops what queues up behind, most of a burst of bindings) and folds repeats of an
// event into a series. Events get a client of their own, so that their rate limit never delays a
// binding. stop shuts the recorder down.
func newController(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, dyn dynamic.Interface, reg *prometheus.Registry,
	log *slog.Logger, opts Options) (*controller.Controller, events.EventRecorder, func(), error) {
	eventClient, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("make event API client: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventClient.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		broadcaster.Shutdown()
		return nil, nil, nil, fmt.Errorf("start recording events: %w", err)
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, opts.Controller.SchedulerName)
	opts.Controller.Hooks = controller.NewAPIHooks(cfg, kube)
	c, err := controller.New(kube, dyn, recorder, reg, log, opts.Controller)
	if err != nil {
		broadcaster.Shutdown()
		return nil, nil, nil, err
	}
	return c, recorder, broadcaster.Shutdown, nil
}

// runLeading runs the controller, under the Lease when leader election is on, beside the metrics
// server, until ctx ends or the Lease is lost, and returns the first error of either.
func runLeading(ctx context.Context, opts Options, log *slog.Logger, kube kubernetes.Interface, c leaderWork, reg *prometheus.Registry) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lease *leaderelection.LeaderElector
	runErr := make(chan error, 1)
	if opts.LeaderElect {
		var err error
		lease, err = newLease(kube, opts, log, c, cancel, runErr)
		if err != nil {
			return err
		}
	}
	serveErr := make(chan error, 1)
	if opts.MetricsAddress != "" {
		h := health{synced: c.HasSynced}
		if lease != nil {
			h.lease = lease
		}
		go func() { serveErr <- serve(ctx, opts.MetricsAddress, opts.Profiling, reg, h) }()
	}
	var err error
	if lease == nil {
		err = c.Run(ctx)
	} else {
		lease.Run(ctx)
		select {
		case err = <-runErr:
		default:
		}
	}
	cancel()
	if opts.MetricsAddress != "" {
		if serr := <-serveErr; serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// protobuf is cfg speaking protobuf, as the Kubernetes components do with built-in objects: the
// API server encodes the placer's pod and node watch events and decodes its bindings at a fraction
// of JSON's cost, and on a busy control plane that cost bounds how fast pods can be bound.
func protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster API configuration (give --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// checkAPIs fails early, saying what to install, when the CRDs the placer reads are absent.
func checkAPIs(kube kubernetes.Interface) error {
	for _, api := range []struct{ gv, resource, fix string }{
		{v1alpha1.GroupVersion.String(), v1alpha1.Resource, "install the HPCJob CRD: kubectl apply -k daemonset/"},
		{nrt.GroupVersionResource.GroupVersion().String(), nrt.GroupVersionResource.Resource,
			"install the NodeResourceTopology CRD (topology.node.k8s.io/v1alpha2) with the node agent: kubectl apply -k daemonset/"},
	} {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(api.gv)
		if err != nil {
			return fmt.Errorf("API %s is not served (%w): %s", api.gv, err, api.fix)
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == api.resource }) {
			return fmt.Errorf("API %s has no resource %s: %s", api.gv, api.resource, api.fix)
		}
	}
	return nil
}

// newLease makes the leader elector that runs c while this replica holds the Lease; when c
// ends (its error goes to runErr) or the Lease is lost, stop ends the process's context.
func newLease(kube kubernetes.Interface, opts Options, log *slog.Logger, c leaderWork, stop context.CancelFunc, runErr chan<- error) (*leaderelection.LeaderElector, error) {
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.LeaseNamespace, Name: opts.LeaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: opts.LeaseName,
		LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading", "lease", opts.LeaseNamespace+"/"+opts.LeaseName, "identity", id)
				runErr <- c.Run(ctx)
				stop()
			},
			OnStoppedLeading: func() {
				log.Info("not leading any more; stopping", "identity", id)
				stop()
			},
			OnNewLeader: func(leader string) {
				if leader != id {
					log.Info("another placer leads", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("set up leader election on Lease %s/%s: %w", opts.LeaseNamespace, opts.LeaseName, err)
	}
	return le, nil
}

// serve exposes /metrics, /healthz and /readyz (health), and with profiling /debug/pprof/, until
// ctx ends.
func serve(ctx context.Context, addr string, profiling bool, reg *prometheus.Registry, h health) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	h.register(ctx, mux)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics on %s: %w", addr, err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
