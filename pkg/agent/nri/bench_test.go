package nri

import (
	"context"
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// BenchmarkCreateContainer measures the plugin's answer to CreateContainer, in process (the hook
// itself) and through the runtime's NRI (ttrpc round trip, default validator, the plugin's
// validation), for a shared container and for a pinned one that allocates and is released again.
func BenchmarkCreateContainer(b *testing.B) {
	for _, tc := range []struct {
		name            string
		pinned, overNRI bool
	}{
		{"shared/hook", false, false},
		{"pinned/hook", true, false},
		{"shared/runtime", false, true},
		{"pinned/runtime", true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b, envOpts{})
			_, sb := e.pod("p", tc.pinned, "1")
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ctr := &api.Container{Id: fmt.Sprintf("%064x", i+1), PodSandboxId: sb.Id, Name: "c0",
					Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-7", Mems: "0-1"}}}}
				if tc.overNRI {
					if _, err := e.runtime.CreateContainer(ctx, &api.CreateContainerRequest{Pod: sb, Container: ctr}); err != nil {
						b.Fatal(err)
					}
				} else if _, _, err := e.plugin.CreateContainer(ctx, sb, ctr); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				e.plugin.forget(ctr.Id)
				if tc.pinned {
					e.agent.ReleasePod(sb.Uid)
				}
				b.StartTimer()
			}
		})
	}
}
