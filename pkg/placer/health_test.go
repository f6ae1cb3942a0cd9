package placer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fakeLease struct {
	leader  bool
	expired error
}

func (l *fakeLease) IsLeader() bool { return l.leader }
func (l *fakeLease) Check(tolerance time.Duration) error {
	if tolerance != leaseHealthTolerance {
		return errors.New("unexpected tolerance")
	}
	return l.expired
}

// /readyz and /healthz through a replica's life: a standby is ready, a new leader is not until its
// caches synced, a leader whose Lease lapsed is neither healthy nor ready, and a stopping replica
// is not ready.
func TestHealthAndReadiness(t *testing.T) {
	lapsed := errors.New("failed election to renew leadership on lease finegrain-placer")
	synced := false
	lease := &fakeLease{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probe := func(h health) (healthz, readyz int, body string) {
		mux := http.NewServeMux()
		h.register(ctx, mux)
		get := func(path string) (int, string) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec.Code, rec.Body.String()
		}
		healthz, _ = get("/healthz")
		readyz, body = get("/readyz")
		return healthz, readyz, body
	}
	elected := health{lease: lease, synced: func() bool { return synced }}
	steps := []struct {
		name            string
		h               health
		set             func()
		healthz, readyz int
		body            string
	}{
		{"standby", elected, func() {}, 200, 200, "[+]informer-sync ok"},
		{"new leader, caches not synced", elected, func() { lease.leader = true }, 200, 503, "[-]informer-sync failed: the caches"},
		{"leader, caches synced", elected, func() { synced = true }, 200, 200, "ok\n"},
		{"leader whose Lease lapsed", elected, func() { lease.expired = lapsed }, 503, 503, "[-]leader-election failed: " + lapsed.Error()},
		{"no leader election, caches not synced", health{synced: func() bool { return synced }}, func() { synced = false }, 200, 503, "[-]informer-sync failed"},
		{"no leader election, caches synced", health{synced: func() bool { return synced }}, func() { synced = true }, 200, 200, "[+]leader-election ok"},
		{"stopping", health{synced: func() bool { return synced }}, cancel, 200, 503, "[-]shutdown failed: the placer is stopping"},
	}
	for _, s := range steps {
		s.set()
		healthz, readyz, body := probe(s.h)
		if healthz != s.healthz || readyz != s.readyz || !strings.Contains(body, s.body) {
			t.Errorf("%s: /healthz %d, /readyz %d %q; want %d, %d containing %q", s.name, healthz, readyz, body, s.healthz, s.readyz, s.body)
		}
	}
}
