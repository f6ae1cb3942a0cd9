package objectives

import (
	"context"
	"fmt"
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/objective"
)

// writeStatus replaces the objective's status with st through the status subresource. On a
// conflict (the objective changed since the informer showed it) it reads the objective again and
// writes once more: the status is the loop's alone.
func (c *Controller) writeStatus(ctx context.Context, u *unstructured.Unstructured, st *v1alpha1.ServiceObjectiveStatus) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return fmt.Errorf("encode the status of %s: %w", keyOf(u), err)
	}
	api := c.dyn.Resource(v1alpha1.ServiceObjectiveGroupVersionResource).Namespace(u.GetNamespace())
	obj := u.DeepCopy()
	for try := 0; ; try++ {
		obj.Object["status"] = m
		_, err = api.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || try == 1 {
			break
		}
		if obj, err = api.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
			break
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		// Deleted during the period: nothing to report to.
		return nil
	case err != nil:
		return fmt.Errorf("write the status of %s: %w", keyOf(u), err)
	}
	return nil
}

// quantity is v as a quantity, to the nanounit (a latency in seconds keeps its nanoseconds).
func quantity(v float64) resource.Quantity {
	if math.Abs(v) < 1e9 {
		return *resource.NewScaledQuantity(int64(math.Round(v*1e9)), resource.Nano)
	}
	return *resource.NewQuantity(int64(math.Min(math.Round(v), math.MaxInt64/2)), resource.DecimalSI)
}

// historyFrom reads the law's history from the status (a service without one has none).
func historyFrom(h *v1alpha1.ObjectiveHistory) objective.History {
	if h == nil {
		return objective.History{}
	}
	out := objective.History{ViolatedAge: int(h.PeriodsSinceViolation), Recall: int(h.RecallPeriods), Probe: h.Probe}
	for _, q := range h.Samples {
		out.Samples = append(out.Samples, q.AsApproximateFloat64())
	}
	if h.NeededCPU != nil {
		out.NeededCapacity = h.NeededCPU.MilliValue()
	}
	return out
}

// historyTo is the status form of the law's history.
func historyTo(h objective.History) *v1alpha1.ObjectiveHistory {
	out := &v1alpha1.ObjectiveHistory{PeriodsSinceViolation: int32(min(h.ViolatedAge, math.MaxInt32)), RecallPeriods: int32(h.Recall), Probe: h.Probe}
	for _, s := range h.Samples {
		out.Samples = append(out.Samples, quantity(s))
	}
	if h.NeededCapacity > 0 {
		out.NeededCPU = resource.NewMilliQuantity(h.NeededCapacity, resource.DecimalSI)
	}
	return out
}
