package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	rev := func(settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings}
	}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamped wins", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v1.2.3"},
		{"no build info", "", nil, "dev"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v0.9.0"},
		{"revision", "", rev(debug.BuildSetting{Key: "vcs.revision", Value: "36b2cd0"}, debug.BuildSetting{Key: "vcs.modified", Value: "false"}), "36b2cd0"},
		{"modified tree", "", rev(debug.BuildSetting{Key: "vcs.revision", Value: "36b2cd0"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "36b2cd0-dirty"},
		{"devel without VCS", "", rev(), "dev"},
		{"empty module version", "", &debug.BuildInfo{}, "dev"},
	} {
		if got := resolve(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: resolve = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestGetAndString(t *testing.T) {
	i := Get("nodeagent")
	if i.Program != "nodeagent" || i.Version == "" || i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get = %+v", i)
	}
	i = Info{Program: "placer", Version: "v1.2.3", GoVersion: "go1.26.0", Platform: "linux/arm64"}
	if got, want := i.String(), "placer version v1.2.3 go1.26.0 linux/arm64"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
