package threadcaps

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The function runs with the capabilities asked for, on a thread of its own: the caller's thread
// keeps its capabilities.
func TestCapabilities(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := capEff(t)
	if before == "0000000000000000" {
		t.Skip("this thread holds no capability to drop; run the test as root")
	}
	for name, c := range map[string]struct {
		run  func(func() error) error
		want string
	}{
		"none":     {Without, "0000000000000000"},
		"SYS_NICE": {func(f func() error) error { return Only(unix.CAP_SYS_NICE, f) }, fmt.Sprintf("%016x", uint64(1)<<unix.CAP_SYS_NICE)},
	} {
		var inside string
		if err := c.run(func() error { inside = capEff(t); return nil }); err != nil {
			t.Fatal(err)
		}
		if inside != c.want {
			t.Errorf("%s: CapEff %s inside, want %s", name, inside, c.want)
		}
		if after := capEff(t); after != before {
			t.Errorf("%s: the caller's CapEff %s after, was %s", name, after, before)
		}
	}
}

func capEff(t *testing.T) string {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Error(err)
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
