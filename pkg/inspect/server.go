package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultAddress is where the server listens unless told otherwise: loopback only, so that pod
// names and pins are not exposed beyond the node. The DaemonSet runs on the host network, so
// `nodeagent pins` on the node reaches it there.
const DefaultAddress = "127.0.0.1:9720"

// Paths served.
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathPins    = "/pins"
	// PathProcesses lists what runs in the pinned containers; QueryPod (namespace/name, repeated)
	// restricts it to some pods.
	PathProcesses = "/processes"
	QueryPod      = "pod"
)

// checkTimeout bounds one health or readiness check.
const checkTimeout = 5 * time.Second

// Check is one named health or readiness condition; Run returns nil when it holds.
type Check struct {
	Name string
	Run  func(context.Context) error
}

// Config is what a Server serves.
type Config struct {
	// Address is host:port to listen on; empty for DefaultAddress.
	Address string
	// Gatherer is what /metrics exposes.
	Gatherer prometheus.Gatherer
	// Pins returns the current view for /pins.
	Pins func() Pins
	// Processes lists the processes of the pinned containers of the given pods (every pinned
	// container for none) for /processes; nil leaves the path unserved.
	Processes func(pods []types.NamespacedName) (Processes, error)
	// Health and Ready are the checks of /healthz and /readyz; every one must pass.
	Health, Ready []Check
	Logger        *slog.Logger
}

// Server is the agent's read-only HTTP endpoint: the inspection server New makes, or the
// metrics-only one of NewMetrics.
type Server struct {
	cfg     Config
	handler http.Handler
	// what names the server in its log lines and errors.
	what string
	// listing holds a token while a /processes request reads /proc: one at a time.
	listing chan struct{}
}

// New checks cfg and builds the server's routes.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Gatherer == nil:
		return nil, errors.New("inspection server: no metrics gatherer")
	case cfg.Pins == nil:
		return nil, errors.New("inspection server: no pins view")
	case cfg.Logger == nil:
		return nil, errors.New("inspection server: no logger")
	}
	if cfg.Address == "" {
		cfg.Address = DefaultAddress
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return nil, fmt.Errorf("inspection server address %q is not host:port: %w", cfg.Address, err)
	}
	s := &Server{cfg: cfg, what: "inspection server", listing: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.Handle(PathMetrics, metricsHandler(cfg))
	mux.Handle(PathHealthz, CheckHandler(cfg.Health))
	mux.Handle(PathReadyz, CheckHandler(cfg.Ready))
	mux.HandleFunc(PathPins, s.pins)
	if cfg.Processes != nil {
		mux.HandleFunc(PathProcesses, s.processes)
	}
	s.handler = readOnly(mux)
	return s, nil
}

// NewMetrics makes a server of /metrics alone, for an address that a cluster's Prometheus
// reaches (the node's own addresses, through the agent's metrics Service), while the inspection
// server, which names pods and lists their processes, stays on loopback. cfg needs Address,
// Gatherer and Logger; the rest is not served.
func NewMetrics(cfg Config) (*Server, error) {
	switch {
	case cfg.Gatherer == nil:
		return nil, errors.New("metrics server: no metrics gatherer")
	case cfg.Logger == nil:
		return nil, errors.New("metrics server: no logger")
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return nil, fmt.Errorf("metrics server address %q is not host:port: %w", cfg.Address, err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathMetrics, metricsHandler(cfg))
	return &Server{cfg: Config{Address: cfg.Address, Gatherer: cfg.Gatherer, Logger: cfg.Logger}, what: "metrics server", handler: readOnly(mux)}, nil
}

func metricsHandler(cfg Config) http.Handler {
	return promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)})
}

// Handler returns the server's routes, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Address returns the configured listen address.
func (s *Server) Address() string { return s.cfg.Address }

// Run listens on the configured address and serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", s.what, s.cfg.Address, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.cfg.Logger.Info("serving", "server", s.what, "address", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s on %s: %w", s.what, ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("%s on %s: shut down: %w", s.what, ln.Addr(), err)
	}
	return nil
}

// readOnly refuses every method but GET and HEAD.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only endpoint: use GET", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CheckHandler answers 200 "ok" when every check passes, 503 otherwise; the body lists each check
// as "[+]name ok" or "[-]name failed: reason", as the Kubernetes components' /healthz and /readyz
// do. The agent's server and the placer's serve their health through it.
func CheckHandler(list []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
		defer cancel()
		var b strings.Builder
		failed := false
		for _, c := range list {
			if err := c.Run(ctx); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
				continue
			}
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(&b, "%s check failed\n", strings.TrimPrefix(r.URL.Path, "/"))
		} else {
			b.WriteString("ok\n")
		}
		_, _ = w.Write([]byte(b.String()))
	})
}

func (s *Server) pins(w http.ResponseWriter, _ *http.Request) {
	s.writeJSON(w, "pins", s.cfg.Pins())
}

// processes answers GET /processes[?pod=namespace/name...]: 400 for any other parameter or a
// malformed pod, 503 while another listing runs or when the agent cannot list.
func (s *Server) processes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var pods []types.NamespacedName
	for key, values := range q {
		if key != QueryPod {
			http.Error(w, fmt.Sprintf("unknown parameter %q: %s takes only %s=namespace/name", key, PathProcesses, QueryPod), http.StatusBadRequest)
			return
		}
		for _, v := range values {
			pod, err := ParsePodName(v)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			pods = append(pods, pod)
		}
	}
	select {
	case s.listing <- struct{}{}:
		defer func() { <-s.listing }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "another process listing is running; try again in a second", http.StatusServiceUnavailable)
		return
	}
	v, err := s.cfg.Processes(pods)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	s.writeJSON(w, "processes", v)
}

// writeJSON answers with value as indented JSON; what names the view in the log.
func (s *Server) writeJSON(w http.ResponseWriter, what string, value any) {
	body, err := json.MarshalIndent(value, "", "  ")
	if err != nil {
		s.cfg.Logger.Error("view not encodable", "view", what, "err", err)
		http.Error(w, what+" view not encodable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}
