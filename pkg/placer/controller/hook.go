package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Hooks calls a job's rescale hook in its launcher pod with a request (v1alpha1.RescaleRequest as
// JSON); nil means the hook acknowledged. ctx carries the hook's timeout.
type Hooks interface {
	Call(ctx context.Context, launcher *corev1.Pod, hook *v1alpha1.RescaleHook, request []byte) error
}

// hookAnswerLimit bounds what of a hook's answer or output an error quotes.
const hookAnswerLimit = 512

// APIHooks calls rescale hooks for real: an HTTP POST to the launcher pod's IP, or a command run
// in the launcher's first container through the API server's pods/exec (the placer then needs
// create on pods/exec).
type APIHooks struct {
	cfg    *rest.Config
	kube   kubernetes.Interface
	client *http.Client
}

// NewAPIHooks returns hooks that exec through the API server cfg names.
func NewAPIHooks(cfg *rest.Config, kube kubernetes.Interface) *APIHooks {
	return &APIHooks{cfg: cfg, kube: kube, client: &http.Client{}}
}

// Call implements Hooks.
func (h *APIHooks) Call(ctx context.Context, launcher *corev1.Pod, hook *v1alpha1.RescaleHook, request []byte) error {
	if hook.HTTP != nil {
		return callHTTP(ctx, h.client, launcher, hook.HTTP, request)
	}
	return h.exec(ctx, launcher, hook.Exec.Command, request)
}

// callHTTP POSTs the request to http://<pod IP>:<port><path>; a 2xx answer acknowledges.
func callHTTP(ctx context.Context, client *http.Client, launcher *corev1.Pod, hook *v1alpha1.HTTPRescaleHook, request []byte) error {
	if launcher.Status.PodIP == "" {
		return fmt.Errorf("launcher %s has no pod IP", launcher.Name)
	}
	url := "http://" + net.JoinHostPort(launcher.Status.PodIP, strconv.Itoa(int(hook.Port))) + hook.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(request))
	if err != nil {
		return fmt.Errorf("rescale hook %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("rescale hook POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, hookAnswerLimit))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("rescale hook POST %s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// exec runs the command in the launcher's first container with the request on its standard input;
// exit status 0 acknowledges.
func (h *APIHooks) exec(ctx context.Context, launcher *corev1.Pod, command []string, request []byte) error {
	if len(launcher.Spec.Containers) == 0 {
		return fmt.Errorf("launcher %s has no container", launcher.Name)
	}
	var out limitedBuffer
	err := ExecInPod(ctx, h.cfg, h.kube, launcher, launcher.Spec.Containers[0].Name, command, bytes.NewReader(request), &out, &out)
	if err != nil {
		return fmt.Errorf("rescale hook %q in %s: %w: %s", strings.Join(command, " "), launcher.Name, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ExecInPod runs a command in a container of a pod through the API server's pods/exec (WebSocket
// first, SPDY where the connection cannot upgrade to it), stdin (nil for none) on its standard
// input; an error means it could not run or exited non-zero. The caller needs create on
// pods/exec.
func ExecInPod(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, pod *corev1.Pod, container string, command []string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container, Command: command, Stdin: stdin != nil, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// limitedBuffer keeps the first hookAnswerLimit bytes of what a hook writes.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := hookAnswerLimit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
