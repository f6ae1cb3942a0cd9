package vcluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/slurm/clusterconf"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// Names of a virtual cluster's objects.
func mungeSecretName(vc *v1alpha1.VirtualCluster) string { return vc.Name + "-munge" }
func sshSecretName(vc *v1alpha1.VirtualCluster) string   { return vc.Name + "-ssh" }
func configMapName(vc *v1alpha1.VirtualCluster) string   { return vc.Name + "-slurm" }

// mungeKeyBytes is the size of a new munge key (mungekey's default is 1024 bytes).
const mungeKeyBytes = 1024

// ownerRef makes vc the controlling owner: the garbage collector deletes the object with it.
func ownerRef(vc *v1alpha1.VirtualCluster) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.VirtualClusterKind,
		Name: vc.Name, UID: vc.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

// objectMeta is the metadata of an object of vc.
func objectMeta(vc *v1alpha1.VirtualCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: vc.Namespace, Labels: map[string]string{v1alpha1.LabelVirtualCluster: vc.Name},
		OwnerReferences: []metav1.OwnerReference{ownerRef(vc)}}
}

// owned checks that vc controls an existing object; an error wrapping errNotOwned otherwise.
func owned(vc *v1alpha1.VirtualCluster, kind string, obj metav1.Object) error {
	if !metav1.IsControlledBy(obj, vc) {
		return fmt.Errorf("%s %s/%s already exists and is not managed by VirtualCluster %s: %w (rename or delete it)", kind, obj.GetNamespace(), obj.GetName(), vc.Name, errNotOwned)
	}
	return nil
}

// ensureObjects creates what the virtual cluster lacks and brings its ConfigMap and pods up to
// date: 1. the munge key and SSH identity Secrets (made once, never rewritten, never logged);
// 2. the ConfigMap; 3. the pods.
func (c *Controller) ensureObjects(ctx context.Context, vc *v1alpha1.VirtualCluster, files clusterconf.Files, hash string, ports v1alpha1.VirtualClusterPorts,
	nodes []*corev1.Node, ctlNode string) error {
	if err := c.ensureSecret(ctx, vc, mungeSecretName(vc), func() (*corev1.Secret, error) {
		key := make([]byte, mungeKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("make a munge key: %w", err)
		}
		return &corev1.Secret{ObjectMeta: objectMeta(vc, mungeSecretName(vc)), Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{layout.MungeKeySecretKey: key}}, nil
	}); err != nil {
		return err
	}
	if err := c.ensureSecret(ctx, vc, sshSecretName(vc), func() (*corev1.Secret, error) {
		id, err := mpi.NewIdentity(rand.Reader, "virtualcluster "+vc.Namespace+"/"+vc.Name)
		if err != nil {
			return nil, err
		}
		return &corev1.Secret{ObjectMeta: objectMeta(vc, sshSecretName(vc)), Type: corev1.SecretTypeSSHAuth,
			Data: map[string][]byte{mpi.SecretPrivateKey: id.PrivateKey, mpi.SecretPublicKey: id.AuthorizedKey}}, nil
	}); err != nil {
		return err
	}
	if err := c.ensureConfigMap(ctx, vc, files); err != nil {
		return err
	}
	return c.ensurePods(ctx, vc, hash, ports, nodes, ctlNode)
}

// ensureSecret creates the Secret with build when it does not exist; an existing one must be the
// virtual cluster's and is left as it is.
func (c *Controller) ensureSecret(ctx context.Context, vc *v1alpha1.VirtualCluster, name string, build func() (*corev1.Secret, error)) error {
	cur, err := c.kube.CoreV1().Secrets(vc.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return owned(vc, "Secret", cur)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read Secret %s/%s: %w", vc.Namespace, name, err)
	}
	s, err := build()
	if err != nil {
		return err
	}
	if _, err := c.kube.CoreV1().Secrets(vc.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Secret %s/%s: %w", vc.Namespace, name, err)
	}
	return nil
}

// ensureConfigMap creates the ConfigMap or patches an owned one whose files differ (with its
// resourceVersion as the precondition). Pods see the new files through their volume; those
// started with another slurm.conf are replaced (ensurePods).
func (c *Controller) ensureConfigMap(ctx context.Context, vc *v1alpha1.VirtualCluster, files clusterconf.Files) error {
	name := configMapName(vc)
	cms := c.kube.CoreV1().ConfigMaps(vc.Namespace)
	cur, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm := &corev1.ConfigMap{ObjectMeta: objectMeta(vc, name), Data: files}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", vc.Namespace, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read ConfigMap %s/%s: %w", vc.Namespace, name, err)
	}
	if err := owned(vc, "ConfigMap", cur); err != nil {
		return err
	}
	if maps.Equal(cur.Data, files) {
		return nil
	}
	// A merge patch of the files, on the resourceVersion just read.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": cur.ResourceVersion}, "data": files})
	if err != nil {
		return err
	}
	if _, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", vc.Namespace, name, err)
	}
	c.log.Info("virtual cluster configuration changed", "virtualCluster", vc.Namespace+"/"+vc.Name)
	return nil
}

// eventObject is what the virtual cluster's events name.
func eventObject(vc *v1alpha1.VirtualCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind(v1alpha1.VirtualClusterKind)
	u.SetNamespace(vc.Namespace)
	u.SetName(vc.Name)
	u.SetUID(vc.UID)
	u.SetResourceVersion(vc.ResourceVersion)
	return u
}
