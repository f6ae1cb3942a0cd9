package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// maxCPURequest bounds CPUCount; no machine has a million CPUs.
var maxCPURequest = resource.MustParse("1M")

// CPUCount turns a container's CPU request into the number of exclusive CPUs it asks for. Only a
// positive whole number of CPUs ("4", "4000m") can be pinned; a fractional request ("1500m",
// "0.5") or one of zero is an error the agent reports and then leaves the container shared.
func CPUCount(q resource.Quantity) (int, error) {
	switch {
	case q.Sign() <= 0:
		return 0, fmt.Errorf("CPU request %s is not positive; exclusive cores need a request of at least 1 CPU", q.String())
	case q.Cmp(maxCPURequest) > 0:
		return 0, fmt.Errorf("CPU request %s is larger than any machine; request a whole number of CPUs the node has", q.String())
	}
	n := q.Value() // rounded up
	if q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) != 0 {
		return 0, fmt.Errorf("CPU request %s is not a whole number of CPUs; exclusive cores need an integer request such as %d", q.String(), n)
	}
	return int(n), nil
}
