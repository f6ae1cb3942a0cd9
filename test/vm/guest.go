package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

const (
	// EnvName is set inside a guest to the name of its configuration.
	EnvName = "FINEGRAIN_VM"
	// EnvSpec is set inside a guest to the path of a JSON file holding its whole Config.
	EnvSpec = "FINEGRAIN_VM_SPEC"
)

// Current returns the configuration of the guest this process runs in; ok is false outside a
// guest (FINEGRAIN_VM unset).
func Current() (cfg Config, ok bool, err error) {
	name := os.Getenv(EnvName)
	if name == "" {
		return Config{}, false, nil
	}
	path := os.Getenv(EnvSpec)
	if path == "" {
		return Config{}, true, fmt.Errorf("%s=%s is set but %s is not: the guest's /init must set both", EnvName, name, EnvSpec)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, true, fmt.Errorf("read guest configuration %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return Config{}, true, fmt.Errorf("parse guest configuration %s: %w", path, err)
	}
	if cfg.Name != name {
		return Config{}, true, fmt.Errorf("guest configuration %s is for %q but %s=%s", path, cfg.Name, EnvName, name)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, true, fmt.Errorf("guest configuration %s: %w", path, err)
	}
	return cfg, true, nil
}

// Guest returns the configuration of the guest the test runs in, and skips the test outside one.
// Tests that compare what the kernel reports with what qemu was told start with it.
func Guest(t testing.TB) Config {
	t.Helper()
	cfg, ok, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("not inside a finegrain test VM (%s unset); `make test-vm` runs this test in qemu guests", EnvName)
	}
	return cfg
}
