// Package priority owns two rules of the placer: an HPCJob's effective priority, and which
// running elastic jobs a waiting gang may shrink. A job's priority is the value of its
// PriorityClass (spec.priorityClassName), or of the cluster's default class when it names none,
// exactly as the API server gives a pod its priority; spec.priority may only lower it, never raise
// it, so a namespace user cannot lift a job above what the cluster's administrator let the
// namespace use (with PriorityClass-scoped ResourceQuotas on the job's pods). A gang may shrink
// only jobs of strictly lower priority, and under ScopeNamespace only jobs of its own namespace.
// The package is pure: it is shown the classes and must not talk to the API server.
package priority

import (
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
)

// Classes is what the placer knows of the cluster's PriorityClasses.
type Classes interface {
	// Value returns the value of the named class.
	Value(name string) (int32, bool)
	// Default returns the cluster's default class: the one marked globalDefault (of several, the
	// one of lowest value, as the API server's Priority admission picks it).
	Default() (name string, value int32, ok bool)
}

// NotFoundError says that a job names a PriorityClass that does not exist.
type NotFoundError struct{ Class string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("PriorityClass %q does not exist: create it, or name an existing class in spec.priorityClassName", e.Class)
}

// Of returns a job's effective priority: its class's value (the default class's when it names
// none, 0 without a default class), lowered to spec.priority when that is lower. A class that
// does not exist is a *NotFoundError; the value returned with it is the one the job would have
// without a class name, for callers that must go on (a job already running).
func Of(spec *v1alpha1.HPCJobSpec, classes Classes) (int32, error) {
	var base int32
	if _, v, ok := classes.Default(); ok {
		base = v
	}
	var err error
	if name := spec.PriorityClassName; name != "" {
		if v, ok := classes.Value(name); ok {
			base = v
		} else {
			err = &NotFoundError{Class: name}
		}
	}
	if p := spec.Priority; p != nil && *p < base {
		return *p, err
	}
	return base, err
}

// Static is a fixed set of classes by name, with the default class's name (empty for none).
type Static struct {
	Values      map[string]int32
	DefaultName string
}

// Value returns the value of the named class.
func (s Static) Value(name string) (int32, bool) {
	v, ok := s.Values[name]
	return v, ok
}

// FromClasses returns the classes of a list of PriorityClass objects; of several marked
// globalDefault, the one of lowest value (then the first by name) is the default.
func FromClasses(pcs []*schedulingv1.PriorityClass) Static {
	s := Static{Values: make(map[string]int32, len(pcs))}
	for _, pc := range pcs {
		s.Values[pc.Name] = pc.Value
		if !pc.GlobalDefault {
			continue
		}
		if d, ok := s.Values[s.DefaultName]; s.DefaultName == "" || !ok || pc.Value < d || (pc.Value == d && pc.Name < s.DefaultName) {
			s.DefaultName = pc.Name
		}
	}
	return s
}

// Default returns the default class, when it is set and exists.
func (s Static) Default() (string, int32, bool) {
	if s.DefaultName == "" {
		return "", 0, false
	}
	v, ok := s.Values[s.DefaultName]
	return s.DefaultName, v, ok
}

// Scope says whose elastic jobs a waiting gang may shrink.
type Scope string

// Shrink scopes (the placer's --shrink-scope).
const (
	// ScopeCluster: elastic jobs of strictly lower priority in any namespace.
	ScopeCluster Scope = "cluster"
	// ScopeNamespace: elastic jobs of strictly lower priority in the gang's own namespace.
	ScopeNamespace Scope = "namespace"
	// ScopeNone: no job is ever shrunk for another.
	ScopeNone Scope = "none"
)

// ParseScope reads a shrink scope.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeCluster, ScopeNamespace, ScopeNone:
		return sc, nil
	}
	return "", fmt.Errorf("shrink scope %q: want %s, %s or %s", s, ScopeCluster, ScopeNamespace, ScopeNone)
}

// Claim is a gang or job as the shrink rule sees it.
type Claim struct {
	Namespace string
	Priority  int32
}

// MayShrink reports whether a waiting gang (beneficiary) may take workers from a running elastic
// job (victim): only of strictly lower priority, and within the scope.
func (s Scope) MayShrink(beneficiary, victim Claim) bool {
	switch {
	case s == ScopeNone || victim.Priority >= beneficiary.Priority:
		return false
	case s == ScopeNamespace:
		return victim.Namespace == beneficiary.Namespace
	}
	return true
}
