package vcluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/finegrain-dev/finegrain/pkg/placer/controller"
)

// APIExecer runs commands in pods through the API server's pods/exec.
type APIExecer struct {
	cfg  *rest.Config
	kube kubernetes.Interface
}

// NewAPIExecer execs with the placer's configuration and client.
func NewAPIExecer(cfg *rest.Config, kube kubernetes.Interface) *APIExecer {
	return &APIExecer{cfg: cfg, kube: kube}
}

var _ Execer = (*APIExecer)(nil)

// Exec runs command in the pod's container; the error carries what it wrote on standard error.
func (e *APIExecer) Exec(ctx context.Context, pod *corev1.Pod, container string, command []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	if err := controller.ExecInPod(ctx, e.cfg, e.kube, pod, container, command, nil, &stdout, &stderr); err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
