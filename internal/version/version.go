// Package version owns what a finegrain binary says about its own build: its version, the Go
// toolchain that built it and the platform it runs on. The version is stamped by the linker
// (`go build -ldflags "-X github.com/finegrain-dev/finegrain/internal/version.version=v1.2.3"`,
// as hack/version.sh --ldflags prints it for make build and hack/images/build.sh); a binary built
// without it falls back to the module version or the VCS revision the Go toolchain recorded, else
// "dev". It reads nothing but the build information and prints nothing itself.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time with -X; empty when the build did not set it.
var version string

// Info describes one binary's build. Its JSON form is what `<program> version -o json` prints
// (docs/interfaces.md): fields may be added, never renamed or removed.
type Info struct {
	Program   string `json:"program"`
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information of the running binary, named program.
func Get(program string) Info {
	bi, _ := debug.ReadBuildInfo()
	return Info{
		Program:   program,
		Version:   resolve(version, bi),
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one-line form, shaped like `go version`: "nodeagent version v1.2.3 go1.26.0
// linux/amd64".
func (i Info) String() string {
	return fmt.Sprintf("%s version %s %s %s", i.Program, i.Version, i.GoVersion, i.Platform)
}

// resolve picks the version: the stamped one, else the main module's version, else the VCS
// revision (with "-dirty" for a modified tree), else "dev". bi may be nil.
func resolve(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "dev"
	}
	if modified == "true" {
		return revision + "-dirty"
	}
	return revision
}
