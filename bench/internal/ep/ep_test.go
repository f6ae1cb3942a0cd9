package ep

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the child: TestMain runs the mode named in EP_TEST_CHILD.
func TestMain(m *testing.M) {
	switch os.Getenv("EP_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "ok":
		if err := Ready(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("result of %s at %d\n", os.Args[1], time.Now().UnixNano())
	case "crash":
		fmt.Fprintln(os.Stderr, "child: cannot allocate")
		os.Exit(3)
	case "chatter":
		fmt.Println("hello")
		os.Exit(0)
	case "hang":
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func spec(mode string, n int) Spec {
	return Spec{
		Path:         os.Args[0],
		Args:         func(rank int) []string { return []string{fmt.Sprintf("rank-%d", rank)} },
		Env:          []string{"EP_TEST_CHILD=" + mode},
		N:            n,
		Stderr:       os.Stderr,
		ReadyTimeout: 10 * time.Second,
	}
}

func TestStartReleaseCollect(t *testing.T) {
	procs, err := Start(context.Background(), spec("ok", 3))
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now().UnixNano()
	if err := Release(procs); err != nil {
		t.Fatal(err)
	}
	outs, err := Collect(procs)
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range outs {
		var rank string
		var at int64
		if _, err := fmt.Sscanf(string(out), "result of %s at %d", &rank, &at); err != nil {
			t.Fatalf("rank %d wrote %q: %v", i, out, err)
		}
		if rank != fmt.Sprintf("rank-%d", i) || procs[i].PID <= 0 {
			t.Errorf("output %d came from %s (pid %d)", i, rank, procs[i].PID)
		}
		if at < released {
			t.Errorf("rank %d produced its result before it was released", i)
		}
	}
}

func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		timeout    time.Duration
	}{
		{"crash", "exited: exit status 3", 10 * time.Second},
		{"chatter", `unexpected output "hello"`, 10 * time.Second},
		{"hang", "not ready after 200ms", 200 * time.Millisecond},
	} {
		s := spec(tc.mode, 2)
		s.ReadyTimeout = tc.timeout
		procs, err := Start(context.Background(), s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.mode, err, tc.want)
		}
		if procs != nil {
			t.Errorf("%s: Start returned processes with its error", tc.mode)
		}
	}
}

func TestReadyNeedsGo(t *testing.T) {
	var out strings.Builder
	if err := Ready(&out, strings.NewReader("go\n")); err != nil || out.String() != readyLine+"\n" {
		t.Errorf("Ready = %v, wrote %q", err, out.String())
	}
	if err := Ready(&out, strings.NewReader("")); err == nil {
		t.Error("Ready went ahead although the parent closed stdin without saying go")
	}
	if err := Ready(&out, strings.NewReader("stop\n")); err == nil || !strings.Contains(err.Error(), `"stop"`) {
		t.Errorf("Ready on a wrong line: %v", err)
	}
}
