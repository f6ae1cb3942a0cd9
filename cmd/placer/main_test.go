package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/finegrain-dev/finegrain/internal/cli"
	"github.com/finegrain-dev/finegrain/internal/cli/clitest"
	"github.com/finegrain-dev/finegrain/pkg/placer"
)

const testdata = "../../pkg/placer/dryrun/testdata/"

func placerCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestPlanCommand(t *testing.T) {
	tests := []struct {
		args   []string
		rc     int
		stdout string
		stderr string
		isJSON bool
	}{
		{[]string{"plan", "--job", testdata + "job-cpu-scale.yaml", "--cluster", testdata + "cluster-paper.yaml", "-o", "json"}, 0, `"worker": "lulesh-worker-0"`, "", true},
		{[]string{"plan", "--job", testdata + "job-none.yaml", "--cluster", testdata + "cluster-fragmented.yaml"}, 1, `"reason": "numa"`, "", true},
		{[]string{"plan", "--job", testdata + "job-network.yaml", "--cluster", testdata + "cluster-stale.yaml", "--output", "text"}, 0, "lulesh-worker-0                      16      0 n2                       1", "", false},
		{[]string{"plan", "--cluster", testdata + "cluster-paper.yaml"}, 1, `"error": "give exactly one of --job FILE and --pod-group NAMESPACE/NAME"`, "", true},
		{[]string{"plan", "--job", "x", "-o", "yaml"}, 2, "", `placer plan: --output "yaml": want json or text`, false},
		{[]string{"plan", "--bogus"}, 2, "", "placer plan: unknown flag: --bogus", false},
		{[]string{"plan", "-job", "x"}, 2, "", "placer plan: -job: long flags take two dashes: --job", false},
		{[]string{"schedule"}, 2, "", `placer: unknown command "schedule"`, false},
		{[]string{"run", "extra"}, 2, "", `placer run: unexpected argument "extra"`, false},
		{[]string{"run", "--kubeconfig", "/nonexistent", "--metrics-address", ""}, 1, "", `read kubeconfig /nonexistent`, false},
		{[]string{"help"}, 0, "  plan     plan an HPCJob", "", false},
		{nil, 2, "", "placer: no command given; want one of plan, run, version", false},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			rc, stdout, stderr := placerCmd(tc.args...)
			if rc != tc.rc {
				t.Errorf("exit %d, want %d; stderr %s", rc, tc.rc, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout %s\ndoes not contain %q", stdout, tc.stdout)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %s\ndoes not contain %q", stderr, tc.stderr)
			}
			if tc.isJSON && !json.Valid([]byte(stdout)) {
				t.Errorf("stdout is not JSON: %s", stdout)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	deprecated := []string{"--lease-duration", "--renew-deadline", "--retry-period", "--lease-namespace", "--lease-name"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  placer COMMAND [flags]", "  run      run the placer against the cluster", "  version  print the program's version"}},
		{[]string{"plan", "-h"}, []string{"Plans an HPCJob", "Usage:\n  placer plan (--job JOB.yaml | --pod-group NAMESPACE/NAME) --cluster SNAPSHOT.yaml [-o json|text]\n", "--job FILE", `-o, --output string`, `(default "json")`}},
		{[]string{"run", "--help"}, []string{"Runs the placer against the cluster", "--leader-elect ", "(default true)",
			"--leader-elect-lease-duration duration", "(default 15s)", "--leader-elect-renew-deadline duration", "(default 10s)",
			"--leader-elect-retry-period duration", "(default 2s)", "--leader-elect-resource-namespace string", "--leader-elect-resource-name string",
			`(default "finegrain-placer")`, "--ssh-port-range FIRST-LAST", "--log-level LEVEL"}},
		{[]string{"version", "-h"}, []string{"Prints placer's version"}},
	} {
		clitest.Help(t, placerCmd, tc.args, tc.want...)
		_, out, _ := placerCmd(tc.args...)
		for _, old := range deprecated {
			if strings.Contains(out, old) {
				t.Errorf("placer %q shows the deprecated %s:\n%s", tc.args, old, out)
			}
		}
	}
	clitest.Version(t, "placer", placerCmd)
}

// parseRun runs `placer run args...` and returns the options the placer would have started with.
func parseRun(t *testing.T, args ...string) (runOptions, string) {
	t.Helper()
	var got runOptions
	record := func(o runOptions, _ io.Writer) error { got = o; return nil }
	var stdout, stderr bytes.Buffer
	if code := cli.Execute(newRoot(newRunCommand(record)), append([]string{"run"}, args...), &stdout, &stderr); code != 0 || stdout.Len() > 0 {
		t.Fatalf("placer run %q: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
	}
	return got, stderr.String()
}

func TestLeaderElectionFlags(t *testing.T) {
	def := placer.DefaultOptions()
	o, warnings := parseRun(t)
	if o.placer.LeaderElect != def.LeaderElect || o.placer.LeaseDuration != def.LeaseDuration || o.placer.LeaseName != def.LeaseName || warnings != "" {
		t.Errorf("defaults: %+v, warnings %q", o.placer, warnings)
	}
	check := func(name string, o runOptions) {
		t.Helper()
		p := o.placer
		if p.LeaderElect || p.LeaseDuration != 30*time.Second || p.RenewDeadline != 20*time.Second || p.RetryPeriod != 3*time.Second ||
			p.LeaseNamespace != "hpc-system" || p.LeaseName != "placer-lock" {
			t.Errorf("%s: parsed %+v", name, p)
		}
	}
	o, warnings = parseRun(t, "--leader-elect=false", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline", "20s",
		"--leader-elect-retry-period=3s", "--leader-elect-resource-namespace", "hpc-system", "--leader-elect-resource-name=placer-lock")
	check("kube-scheduler's names", o)
	if warnings != "" {
		t.Errorf("kube-scheduler's names warn: %q", warnings)
	}
	o, warnings = parseRun(t, "--leader-elect=false", "--lease-duration=30s", "--renew-deadline", "20s",
		"--retry-period=3s", "--lease-namespace", "hpc-system", "--lease-name=placer-lock")
	check("the old names", o)
	for _, r := range renamedLeaderElectionFlags {
		if want := "Flag --" + r.old + " has been deprecated, use --" + r.current + " instead\n"; !strings.Contains(warnings, want) {
			t.Errorf("warnings lack %q:\n%s", want, warnings)
		}
	}
}

func TestRunFlags(t *testing.T) {
	o, _ := parseRun(t, "--kube-api-qps", "25.5", "--kube-api-burst=50", "--ssh-port-range", "30000-30099", "--log-level", "debug", "--scheduler-name", "x")
	c := o.placer.Controller
	if o.placer.KubeAPIQPS != 25.5 || o.placer.KubeAPIBurst != 50 || c.SSHPorts.String() != "30000-30099" || o.logLevel.String() != "DEBUG" || c.SchedulerName != "x" {
		t.Errorf("parsed %+v, log level %v", o.placer, o.logLevel)
	}
	if o, _ := parseRun(t); !o.placer.Controller.TaskGroups {
		t.Error("task groups off by default")
	}
	if o, _ := parseRun(t, "--task-groups=false"); o.placer.Controller.TaskGroups {
		t.Error("--task-groups=false left task groups on")
	}
	if code, _, errOut := placerCmd("run", "--ssh-port-range", "9-1"); code != 2 || !strings.Contains(errOut, `placer run: invalid argument "9-1" for "--ssh-port-range" flag`) {
		t.Errorf("bad port range: exit %d, %q", code, errOut)
	}
}

// --priority-aging is off by default, takes a priority per hour, and refuses what is not one.
func TestPriorityAgingFlag(t *testing.T) {
	if o, _ := parseRun(t); o.placer.Controller.Aging.PerHour != 0 {
		t.Errorf("aging on by default: %+v", o.placer.Controller.Aging)
	}
	if o, _ := parseRun(t, "--priority-aging=2.5"); o.placer.Controller.Aging.PerHour != 2.5 {
		t.Errorf("--priority-aging=2.5 parsed as %+v", o.placer.Controller.Aging)
	}
	for _, bad := range []string{"-1", "x", "NaN", "Inf"} {
		code, _, errOut := placerCmd("run", "--priority-aging", bad)
		if want := `placer run: invalid argument "` + bad + `" for "--priority-aging" flag: want a priority per hour, a number 0 or above (0: off)`; code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("--priority-aging %s: exit %d, %q", bad, code, errOut)
		}
	}
}

func FuzzParseAging(f *testing.F) {
	for _, s := range []string{"0", "2.5", "-1", "1e400", "NaN", "+Inf", "0x10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAging(s)
		if err != nil {
			if a.PerHour != 0 || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("%q: %+v, %v", s, a, err)
			}
			return
		}
		if !(a.PerHour >= 0) || math.IsInf(a.PerHour, 0) {
			t.Errorf("%q parsed as %v", s, a.PerHour)
		}
	})
}

// --slurm-port-range sets where virtual clusters' ports come from; the default lies beside the
// workers' SSH ports.
func TestSlurmPortRangeFlag(t *testing.T) {
	if o, _ := parseRun(t); o.placer.VirtualClusters.Ports.String() != "21000-21999" {
		t.Errorf("default --slurm-port-range %s, want 21000-21999", o.placer.VirtualClusters.Ports)
	}
	if o, _ := parseRun(t, "--slurm-port-range=40000-40159"); o.placer.VirtualClusters.Ports.String() != "40000-40159" {
		t.Errorf("--slurm-port-range=40000-40159 parsed as %s", o.placer.VirtualClusters.Ports)
	}
	if code, _, errOut := placerCmd("run", "--slurm-port-range", "9-1"); code != 2 || !strings.Contains(errOut, `invalid argument "9-1" for "--slurm-port-range" flag`) {
		t.Errorf("bad port range: exit %d, %q", code, errOut)
	}
}

// The Slurm delegation bridge's flags: on every 250 ms, exclusive, least-loaded, the pause
// image by default; each settable, and a placement policy other than the two refused.
func TestSlurmBridgeFlags(t *testing.T) {
	o, _ := parseRun(t)
	if sb := o.placer.SlurmBridge; sb.Interval != 250*time.Millisecond || !sb.ExclusiveNodes || sb.Placement != "least-loaded" || sb.Image != "localhost/finegrain-pause:dev" {
		t.Errorf("defaults %+v", sb)
	}
	o, _ = parseRun(t, "--slurm-bridge-interval=0", "--slurm-exclusive-nodes=false", "--slurm-placement=most-loaded", "--slurm-placeholder-image=pause:x")
	if sb := o.placer.SlurmBridge; sb.Interval != 0 || sb.ExclusiveNodes || sb.Placement != "most-loaded" || sb.Image != "pause:x" {
		t.Errorf("set %+v", sb)
	}
	if code, _, errOut := placerCmd("run", "--slurm-placement", "packed"); code != 2 || !strings.Contains(errOut, "want least-loaded or most-loaded") {
		t.Errorf("bad placement: exit %d, %q", code, errOut)
	}
}
