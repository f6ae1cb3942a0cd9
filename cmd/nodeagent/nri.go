package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/finegrain-dev/finegrain/pkg/agent"
	"github.com/finegrain-dev/finegrain/pkg/agent/nri"
	"github.com/finegrain-dev/finegrain/pkg/metrics"
)

// nriOptions are the NRI flags of `nodeagent run`.
type nriOptions struct {
	mode   nri.Mode
	plugin nri.Options
}

func addNRIFlags(fs *pflag.FlagSet, o *nriOptions) {
	o.mode, o.plugin = nri.ModeAuto, nri.DefaultOptions()
	fs.Func("nri", "`MODE` of the container-creation path: auto (NRI when the runtime's NRI socket exists at start, inotify otherwise), on (NRI, waiting for the socket) or off (inotify) (default auto)",
		func(s string) error {
			m, err := nri.ParseMode(s)
			o.mode = m
			return err
		})
	fs.StringVar(&o.plugin.SocketPath, "nri-socket", o.plugin.SocketPath, "the runtime's NRI socket")
	fs.StringVar(&o.plugin.PluginName, "nri-plugin-name", o.plugin.PluginName, "NRI plugin name (containerd's required_plugins lists it)")
	fs.StringVar(&o.plugin.PluginIndex, "nri-plugin-index", o.plugin.PluginIndex, "NRI plugin index (two digits; order among the runtime's plugins)")
	fs.DurationVar(&o.plugin.PodWait, "nri-pod-wait", o.plugin.PodWait, "longest wait at a container creation for the API server to deliver a pod asking for exclusive CPUs (at most half the runtime's request timeout)")
}

// selectPath chooses how the agent learns of new containers and sets the agent's options for it:
// through NRI the agent decides every container at its creation and needs no inotify watcher.
func selectPath(o *runOptions, log *slog.Logger) bool {
	use, why := nri.Select(o.nri.mode, o.nri.plugin.SocketPath)
	path := agent.PathInotify
	switch {
	case use:
		path = agent.PathDecide
		o.agent.Inotify, o.agent.SyncDecisions = false, true
	case !o.agent.Inotify:
		path = agent.PathInformer
	}
	log.Info("container creation path chosen", "path", string(path), "reason", why)
	return use
}

// runNRI registers the path and NRI metrics and, when the NRI path was chosen, runs the plugin
// until ctx ends. The channel yields the plugin's end.
func runNRI(ctx context.Context, o nriOptions, use bool, a *agent.Agent, reg prometheus.Registerer, log *slog.Logger) (<-chan error, error) {
	labels := metrics.NRILabels{
		Events:  []string{nri.EventCreateContainer, nri.EventUpdateContainer, nri.EventSynchronize, nri.EventValidate, nri.EventRemovePod},
		Reasons: []string{nri.RefusedTooLarge, nri.RefusedNoFit, nri.RefusedUnknownPod, nri.RefusedOther, nri.RefusedValidation},
	}
	for _, p := range []agent.Path{agent.PathDecide, agent.PathInotify, agent.PathInformer, agent.PathScan} {
		labels.Paths = append(labels.Paths, string(p))
	}
	for _, p := range a.Snapshot().Paths {
		labels.Enabled = append(labels.Enabled, string(p))
	}
	m, err := metrics.NewNRI(reg, labels)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	if !use {
		done <- nil
		return done, nil
	}
	p, err := nri.New(o.plugin, a, m, log)
	if err != nil {
		return nil, err
	}
	go func() { done <- p.Run(ctx) }()
	return done, nil
}
