package v1alpha1

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// slurmPartitionName is what the generated slurm.conf can carry as a PartitionName: no spaces,
// '=', ',' or '#', which Slurm's configuration parser would split at.
var slurmPartitionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// ValidateVirtualCluster reports everything wrong with a defaulted VirtualCluster, each error
// naming its field and what is allowed. An empty list means the controller can act on it.
func ValidateVirtualCluster(vc *VirtualCluster) field.ErrorList {
	var errs field.ErrorList
	np := field.NewPath("metadata", "name")
	switch {
	case vc.Name == "":
		errs = append(errs, field.Required(np, "the virtual cluster needs a name"))
	case len(vc.Name) > MaxVirtualClusterNameLength:
		errs = append(errs, field.TooLong(np, vc.Name, MaxVirtualClusterNameLength))
	default:
		for _, msg := range validation.IsDNS1123Label(vc.Name) {
			errs = append(errs, field.Invalid(np, vc.Name, msg))
		}
	}
	sp := field.NewPath("spec")
	if vc.Spec.Image == "" {
		errs = append(errs, field.Required(sp.Child("image"), "name the image of the virtual cluster's pods, or omit it for "+DefaultSlurmImage))
	}
	errs = append(errs, metav1validation.ValidateLabels(vc.Spec.NodeSelector, sp.Child("nodeSelector"))...)
	errs = append(errs, validatePartitions(vc.Spec.Partitions, sp.Child("partitions"))...)
	if sv := vc.Spec.SharedVolume; sv != nil {
		errs = append(errs, validateSharedVolume(sv, sp.Child("sharedVolume"))...)
	}
	return errs
}

// mountPath is what a shared volume's mountPath may be: absolute, of plain names.
var mountPath = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)

// systemDirs are the image's directories a shared volume may not cover: the programs, libraries
// and configuration the daemons run from (the Slurm and munge configuration mounts are under
// /etc and /run), and the kernel's file systems.
var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr"}

// podMounts are the virtual cluster's own mounts outside systemDirs: a shared volume may neither
// hold nor be inside one.
var podMounts = []string{layout.SSHDir, layout.SpoolDir}

func validateSharedVolume(sv *SharedVolume, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp := p.Child("claimName")
	if sv.ClaimName == "" {
		errs = append(errs, field.Required(cp, "name a ReadWriteMany PersistentVolumeClaim of the virtual cluster's namespace"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(sv.ClaimName) {
			errs = append(errs, field.Invalid(cp, sv.ClaimName, msg))
		}
	}
	mp, m := p.Child("mountPath"), sv.MountPath
	switch {
	case !mountPath.MatchString(m) || path.Clean(m) != m:
		errs = append(errs, field.Invalid(mp, m, "must be an absolute path of letters, digits, '.', '_' and '-' without '.' or '..' elements, such as "+DefaultSharedMountPath))
	case slices.ContainsFunc(systemDirs, func(d string) bool { return within(m, d) }):
		errs = append(errs, field.Invalid(mp, m, "is a system directory of the image ("+strings.Join(systemDirs, ", ")+" and below): choose another, such as "+DefaultSharedMountPath))
	case slices.ContainsFunc(podMounts, func(d string) bool { return within(m, d) || within(d, m) }):
		errs = append(errs, field.Invalid(mp, m, "holds or is inside one of the pods' own mounts ("+strings.Join(podMounts, ", ")+"): choose another, such as "+DefaultSharedMountPath))
	}
	return errs
}

// within reports whether the clean absolute path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func validatePartitions(parts []SlurmPartition, pp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(parts) == 0:
		return append(errs, field.Required(pp, "declare at least one partition, or omit the field for one partition "+DefaultPartitionName+" over every node"))
	case len(parts) > MaxPartitions:
		return append(errs, field.TooMany(pp, len(parts), MaxPartitions))
	}
	names := map[string]bool{}
	defaults := 0
	for i := range parts {
		p := &parts[i]
		ip := pp.Index(i)
		switch {
		case !slurmPartitionName.MatchString(p.Name):
			errs = append(errs, field.Invalid(ip.Child("name"), p.Name, "must be 1 to 63 letters, digits, '-' or '_', starting with a letter or digit"))
		case names[p.Name]:
			errs = append(errs, field.Duplicate(ip.Child("name"), p.Name))
		}
		names[p.Name] = true
		if p.Default {
			defaults++
			if defaults == 2 {
				errs = append(errs, field.Invalid(ip.Child("default"), true, "only one partition can be the default"))
			}
		}
		seen := map[string]bool{}
		for j, n := range p.Nodes {
			for _, msg := range validation.IsDNS1123Subdomain(n) {
				errs = append(errs, field.Invalid(ip.Child("nodes").Index(j), n, msg))
			}
			if seen[n] {
				errs = append(errs, field.Duplicate(ip.Child("nodes").Index(j), n))
			}
			seen[n] = true
		}
		if p.MaxTime != nil && p.MaxTime.Duration <= 0 {
			errs = append(errs, field.Invalid(ip.Child("maxTime"), p.MaxTime.Duration.String(), "must be positive, such as 2h; omit it for no limit"))
		}
		if p.DefaultTime != nil {
			switch d := p.DefaultTime.Duration; {
			case d <= 0:
				errs = append(errs, field.Invalid(ip.Child("defaultTime"), d.String(), "must be positive, such as 30m"))
			case p.MaxTime != nil && d > p.MaxTime.Duration:
				errs = append(errs, field.Invalid(ip.Child("defaultTime"), d.String(), fmt.Sprintf("must not exceed maxTime (%s)", p.MaxTime.Duration)))
			}
		}
		if p.MaxNodes < 0 {
			errs = append(errs, field.Invalid(ip.Child("maxNodes"), p.MaxNodes, "must be 0 (unlimited) or more"))
		}
		if p.MaxCPUsPerNode < 0 {
			errs = append(errs, field.Invalid(ip.Child("maxCPUsPerNode"), p.MaxCPUsPerNode, "must be 0 (unlimited) or more"))
		}
	}
	return errs
}
