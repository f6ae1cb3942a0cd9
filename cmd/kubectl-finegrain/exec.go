package main

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

// podExec runs a command in a container of a pod and streams its output, as `kubectl exec`
// does; a command that exits non-zero is an error.
type podExec interface {
	Exec(ctx context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error
}

var _ podExec = (*apiExec)(nil)

// apiExec execs through the API server's pods/exec subresource: WebSocket first, SPDY where
// the API server or a proxy cannot upgrade to it (kubectl's order).
type apiExec struct {
	cfg    *rest.Config
	core   rest.Interface
	params runtime.ParameterCodec
}

func newAPIExec(cc clientcmd.ClientConfig) (podExec, error) {
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-finegrain"
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("core/v1 scheme: %w", err)
	}
	core := rest.CopyConfig(cfg)
	core.APIPath = "/api"
	core.GroupVersion = &schema.GroupVersion{Version: "v1"}
	core.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	client, err := rest.RESTClientFor(core)
	if err != nil {
		return nil, fmt.Errorf("core/v1 API client: %w", err)
	}
	return &apiExec{cfg: cfg, core: client, params: runtime.NewParameterCodec(scheme)}, nil
}

func (e *apiExec) Exec(ctx context.Context, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	req := e.core.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, e.params)
	ws, err := remotecommand.NewWebSocketExecutor(e.cfg, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}

// boundedBuffer keeps the first max bytes written and drops the rest, noting that it did:
// failing the write instead would only make client-go log the failure and end the stream early.
type boundedBuffer struct {
	buf       []byte
	max       int
	truncated bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	keep := min(len(p), b.max-len(b.buf))
	b.buf = append(b.buf, p[:keep]...)
	b.truncated = b.truncated || keep < len(p)
	return len(p), nil
}
