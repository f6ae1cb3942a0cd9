package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Messages of the agent's log the bench reads (pkg/agent, pkg/agent/nri).
const (
	msgPinned        = "pinned container"
	msgCreatedPinned = "NRI: container created pinned"
)

// agentRecord is one of those log lines; durations are nanoseconds in the JSON log.
type agentRecord struct {
	Msg    string          `json:"msg"`
	PodUID string          `json:"podUID"`
	Via    string          `json:"via"`
	Window json.RawMessage `json:"window"`
	Took   json.RawMessage `json:"took"`
}

// annotate adds the agent's and containerd's accounts to the samples: the agent's log since
// `since` (read through the API server) and containerd's log file.
func annotate(ctx context.Context, client kubernetes.Interface, agentPod *corev1.Pod, since time.Time, containerdLog string, samples []sample) error {
	t := metav1.NewTime(since)
	data, err := client.CoreV1().Pods(agentPod.Namespace).GetLogs(agentPod.Name, &corev1.PodLogOptions{SinceTime: &t}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("agent logs: %w", err)
	}
	byUID := map[string]*sample{}
	byID := map[string]*sample{}
	for i := range samples {
		byUID[samples[i].UID] = &samples[i]
		byID[samples[i].ContainerID] = &samples[i]
	}
	if err := readAgentLog(bytes.NewReader(data), byUID); err != nil {
		return err
	}
	if containerdLog == "" {
		return nil
	}
	f, err := os.Open(containerdLog)
	if err != nil {
		return fmt.Errorf("containerd log: %w", err)
	}
	defer f.Close()
	times, err := createContainerTimes(f, since)
	if err != nil {
		return err
	}
	for id, d := range times {
		if s := byID[id]; s != nil {
			s.CreateContainer = d
		}
	}
	return nil
}

// readAgentLog fills Via, Window and Hook from the agent's JSON log lines; other lines are
// skipped.
func readAgentLog(r io.Reader, byUID map[string]*sample) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec agentRecord
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		s := byUID[rec.PodUID]
		if s == nil {
			continue
		}
		var err error
		switch rec.Msg {
		case msgPinned:
			s.Via = rec.Via
			s.Window, err = logDuration(rec.Window)
		case msgCreatedPinned:
			s.Hook, err = logDuration(rec.Took)
		}
		if err != nil {
			return fmt.Errorf("agent log line %q: %w", sc.Text(), err)
		}
	}
	return sc.Err()
}

// logDuration reads a duration slog wrote: integer nanoseconds (JSON handler) or a Go duration
// string (text handler).
func logDuration(raw json.RawMessage) (time.Duration, error) {
	var ns int64
	if err := json.Unmarshal(raw, &ns); err == nil {
		return time.Duration(ns), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("duration %s is neither nanoseconds nor a duration string", raw)
	}
	return time.ParseDuration(s)
}

// containerd's CRI logs both ends of every CreateContainer at info level, naming the container by
// its metadata (`name:\"worker\"` in 2.x, `&ContainerMetadata{Name:worker,Attempt:0,}` in 1.6).
var (
	createStart = regexp.MustCompile(`^time="([^"]+)".*msg="CreateContainer within sandbox \\"([0-9a-f]+)\\" for container (.+)"$`)
	createEnd   = regexp.MustCompile(`^time="([^"]+)".*msg="CreateContainer within sandbox \\"([0-9a-f]+)\\" for (.+) returns container id \\"([0-9a-f]+)\\""$`)
)

// createContainerTimes returns, by container ID, how long containerd took for each
// CreateContainer that started after since.
func createContainerTimes(r io.Reader, since time.Time) (map[string]time.Duration, error) {
	started := map[string]time.Time{}
	out := map[string]time.Duration{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := createEnd.FindStringSubmatch(line); m != nil {
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				return nil, fmt.Errorf("containerd log time %q: %w", m[1], err)
			}
			if start, ok := started[m[2]+"/"+m[3]]; ok {
				out[m[4]] = at.Sub(start)
				delete(started, m[2]+"/"+m[3])
			}
			continue
		}
		if m := createStart.FindStringSubmatch(line); m != nil {
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				return nil, fmt.Errorf("containerd log time %q: %w", m[1], err)
			}
			if !at.Before(since) {
				started[m[2]+"/"+m[3]] = at
			}
		}
	}
	return out, sc.Err()
}
