package controller

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// An HTTP rescale hook gets the request as a JSON POST at the launcher's address, port and path;
// a 2xx answer acknowledges, anything else is refused with the answer quoted, and a hook that does
// not answer ends with its context.
func TestHTTPHook(t *testing.T) {
	var got v1alpha1.RescaleRequest
	var method, path, ctype string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path, ctype = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &got)
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("not now\n"))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)
	launcher := &corev1.Pod{Status: corev1.PodStatus{PodIP: host}}
	req := v1alpha1.RescaleRequest{Job: "hpc/el", Direction: v1alpha1.RescaleShrink, FromWorkers: 4, ToWorkers: 3,
		Workers: []string{"a", "b", "c"}, Hostfile: "a slots=8\nb slots=8\nc slots=8\n"}
	body, _ := json.Marshal(req)
	hooks := NewAPIHooks(nil, nil)
	hook := &v1alpha1.RescaleHook{HTTP: &v1alpha1.HTTPRescaleHook{Port: int32(p), Path: "/rescale"}}
	if err := hooks.Call(context.Background(), launcher, hook, body); err != nil {
		t.Fatalf("acknowledged hook: %v", err)
	}
	if method != http.MethodPost || path != "/rescale" || ctype != "application/json" || got.ToWorkers != 3 || len(got.Workers) != 3 || got.Hostfile != req.Hostfile {
		t.Errorf("hook got %s %s (%s) %+v", method, path, ctype, got)
	}
	status = http.StatusConflict
	err := hooks.Call(context.Background(), launcher, hook, body)
	if err == nil || !strings.Contains(err.Error(), "answered 409 Conflict: not now") {
		t.Errorf("refusing hook: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	hook.HTTP.Path = "/slow"
	if err := hooks.Call(ctx, launcher, hook, body); err == nil || ctx.Err() == nil {
		t.Errorf("silent hook: %v", err)
	}
	if err := hooks.Call(context.Background(), &corev1.Pod{}, hook, body); err == nil || !strings.Contains(err.Error(), "no pod IP") {
		t.Errorf("launcher without an address: %v", err)
	}
}
