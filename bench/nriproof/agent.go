package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/finegrain-dev/finegrain/bench/internal/agentbench"
	"github.com/finegrain-dev/finegrain/pkg/inspect"
)

// withMode replaces the path flags in args: --nri=on pins at creation (the agent waits for the
// socket), --nri=off with inotify is the path of runtimes without NRI.
func withMode(args []string, m mode) []string {
	if m == modeNRI {
		return agentbench.ReplaceFlags(args, []string{"nri", "inotify"}, "--nri=on")
	}
	return agentbench.ReplaceFlags(args, []string{"nri", "inotify"}, "--nri=off", "--inotify=true")
}

// agentView observes the agent through its inspection endpoint on this node.
type agentView struct {
	endpoint string
}

// waitPath waits until the agent reports the mode's path first, and for NRI that the runtime
// synchronised its plugin.
func (a agentView) waitPath(ctx context.Context, m mode) error {
	return agentbench.Poll(ctx, "the agent to take the "+string(m)+" path", time.Minute, func() error {
		v, err := inspect.Fetch(ctx, http.DefaultClient, a.endpoint)
		if err != nil {
			return err
		}
		if len(v.Paths) == 0 || v.Paths[0] != string(m) {
			return fmt.Errorf("agent paths %v", v.Paths)
		}
		if m != modeNRI {
			return nil
		}
		metrics, err := a.get(ctx, "/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(metrics, "\nfinegrain_nodeagent_nri_connected 1\n") {
			return fmt.Errorf("the NRI plugin is not connected yet")
		}
		return nil
	})
}

// noPins waits until the agent holds no exclusive CPUs (the previous worker's were released).
func (a agentView) noPins(ctx context.Context) error {
	return agentbench.Poll(ctx, "the agent to release every pin", time.Minute, func() error {
		v, err := inspect.Fetch(ctx, http.DefaultClient, a.endpoint)
		if err != nil {
			return err
		}
		for _, c := range v.Containers {
			if c.Pool == inspect.PoolExclusive {
				return fmt.Errorf("%s/%s still holds %s", c.PodLabel(), c.Container, c.CPUs)
			}
		}
		return nil
	})
}

func (a agentView) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.endpoint+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(body), nil
}
