package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// agentPins reads what the agent itself logged of the pins it wrote through path via: its own
// window (from noticing the cgroup to the end of the write) and how long naming the container
// through the runtime took. They split the recorder's window into the agent's share and the rest.
func agentPins(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, via string) (windows, resolves []time.Duration, err error) {
	req := client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name})
	stream, err := req.Stream(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("agent log of %s: %w", pod.Name, err)
	}
	defer stream.Close()
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Via     string `json:"via"`
			Window  int64  `json:"window"`
			Resolve int64  `json:"resolve"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "pinned container" || line.Via != via {
			continue
		}
		windows = append(windows, time.Duration(line.Window))
		resolves = append(resolves, time.Duration(line.Resolve))
	}
	return windows, resolves, sc.Err()
}
