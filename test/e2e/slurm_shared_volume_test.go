//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/placer/vcluster"
	"github.com/finegrain-dev/finegrain/test/e2e/framework"
)

// sharedClaim makes a virtual cluster's shared volume (spec.sharedVolume, docs/slurm.md "Shared
// file system"): the PersistentVolumeClaim claim in ns with the access mode ReadWriteMany, bound
// to a hostPath PersistentVolume of a new directory of this host, whose path it returns. The
// directory, the volume and the claim go when the test ends.
//
// Why a hostPath volume is truly ReadWriteMany here: every node of the local cluster is this
// host, and each node's mount namespace is a copy of the host's (hack/cluster/README.md,
// "Mounts"), so a directory of the host's root file system is one directory for the test and
// for the pods on every node. Kubernetes' table of access modes lists hostPath as ReadWriteOnce
// because a host path is one machine's; the API accepts any access mode on a PersistentVolume,
// and the claim binds to the volume whose modes hold its own. The volume is bound to the claim
// by name (claimRef, volumeName), so no storage class or provisioner takes part.
func sharedClaim(t *testing.T, c *framework.Cluster, ns, claim string) string {
	t.Helper()
	ctx, start := context.Background(), time.Now()
	dir := t.TempDir()
	rwx := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	size := resource.MustParse("1Gi")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   rwx,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
			},
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PersistentVolume %s: %v", pv.Name, err)
	}
	// Cleanups run last first: the virtual clusters, made after this, are gone with their pods
	// before the claim, then the volume, are deleted.
	t.Cleanup(func() {
		if err := c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete PersistentVolume %s: %v", pv.Name, err)
		}
	})
	// The claim after the volume has been seen by the binder (kube-controller-manager): a claim
	// it reads before the volume is bound only at its next resync, 15 s later.
	framework.Eventually(t, "PersistentVolume "+pv.Name+" to be available", 30*time.Second, func(ctx context.Context) error {
		got, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.VolumeAvailable {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		return nil
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      rwx,
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PersistentVolumeClaim %s/%s: %v", ns, claim, err)
	}
	t.Cleanup(func() {
		if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), claim, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete PersistentVolumeClaim %s/%s: %v", ns, claim, err)
		}
	})
	// Bound before a pod mounts it: a kubelet that finds the claim unbound retries the pod only
	// after its 10 s back-off.
	framework.Eventually(t, "PersistentVolumeClaim "+ns+"/"+claim+" to be bound", 30*time.Second, func(ctx context.Context) error {
		got, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		return nil
	})
	t.Logf("PersistentVolumeClaim %s/%s bound to the hostPath volume %s (%s) after %s", ns, claim, pv.Name, dir, time.Since(start).Round(time.Millisecond))
	return dir
}

// waitSharedVolumeUnusable waits until the virtual cluster says, in its Ready condition, that it
// cannot use its shared volume's claim, naming it, and checks that it made no pods.
func waitSharedVolumeUnusable(t *testing.T, c *framework.Cluster, ns, name, claim string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	framework.Eventually(t, "VirtualCluster "+name+" to report its shared volume unusable", vcReadyTimeout, func(ctx context.Context) error {
		cond = meta.FindStatusCondition(getVC(t, c, ns, name).Status.Conditions, v1alpha1.VirtualClusterReady)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != vcluster.ReasonSharedVolume ||
			!strings.Contains(cond.Message, "PersistentVolumeClaim "+ns+"/"+claim+" ") {
			return fmt.Errorf("Ready: %+v", cond)
		}
		return nil
	})
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelVirtualCluster + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("VirtualCluster %s made pods %s without its shared volume", name, podNames(pods.Items))
	}
	return cond
}
