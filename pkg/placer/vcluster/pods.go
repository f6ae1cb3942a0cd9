package vcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	"github.com/finegrain-dev/finegrain/pkg/mpi"
	"github.com/finegrain-dev/finegrain/pkg/slurm"
	"github.com/finegrain-dev/finegrain/pkg/slurm/layout"
)

// AnnotationConfigHash is the hash of the generated configuration a pod was made with.
const AnnotationConfigHash = "finegrain.dev/slurm-config-hash"

// Where the pods mount what the virtual cluster gives them.
const (
	sshDir = layout.SSHDir
	// sharedVolumeName is the pods' volume of spec.sharedVolume.
	sharedVolumeName = "shared"
	// Requests of each pod: the daemons idle most of the time; jobs run in the shared pool
	// beside them.
	podCPURequest    = "50m"
	podMemoryRequest = "64Mi"
)

// ctlPodName and nodePodName name the virtual cluster's pods; a node name too long for a pod
// name is replaced by a hash of it.
func ctlPodName(vc *v1alpha1.VirtualCluster) string { return vc.Name + "-" + layout.RoleSlurmctld }

func nodePodName(vc *v1alpha1.VirtualCluster, node string) string {
	name := vc.Name + "-" + layout.RoleSlurmd + "-" + node
	if len(name) > validation.DNS1123SubdomainMaxLength {
		sum := sha256.Sum256([]byte(node))
		name = vc.Name + "-" + layout.RoleSlurmd + "-" + hex.EncodeToString(sum[:8])
	}
	return name
}

// desiredPods are the virtual cluster's pods by name: slurmctld on ctlNode, a node pod on every
// spanned node, with the virtual cluster's ports.
func desiredPods(vc *v1alpha1.VirtualCluster, hash string, ports v1alpha1.VirtualClusterPorts, nodes []*corev1.Node, ctlNode string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	ctl := podFor(vc, hash, layout.RoleSlurmctld, ctlPodName(vc), ctlNode, ports)
	out[ctl.Name] = ctl
	for _, n := range nodes {
		p := podFor(vc, hash, layout.RoleSlurmd, nodePodName(vc, n.Name), n.Name, ports)
		out[p.Name] = p
	}
	return out
}

// podFor is one pod of the virtual cluster: on its node (bound by name, in the shared pool),
// on the node's network with the virtual cluster's ports, the image's entrypoint starting the
// role's daemons (images/mpi/README.md).
func podFor(vc *v1alpha1.VirtualCluster, hash, role, name, node string, ports v1alpha1.VirtualClusterPorts) *corev1.Pod {
	m := objectMeta(vc, name)
	m.Labels[v1alpha1.LabelRole] = role
	m.Annotations = map[string]string{AnnotationConfigHash: hash}
	env := []corev1.EnvVar{
		{Name: layout.EnvRole, Value: role},
		{Name: layout.EnvSlurmConf, Value: layout.SlurmConf},
		// squeue in a shell of the pod shows why the bridge still holds a job.
		{Name: "SQUEUE_FORMAT2", Value: slurm.SqueueFormat},
		{Name: mpi.EnvSSHPort, Value: strconv.Itoa(int(ports.SSH))},
		{Name: mpi.EnvSSHDir, Value: sshDir},
	}
	containerPorts := []corev1.ContainerPort{{Name: "slurmctld", ContainerPort: ports.Slurmctld, HostPort: ports.Slurmctld}}
	if role == layout.RoleSlurmd {
		env = append(env, corev1.EnvVar{Name: layout.EnvNodeName, Value: node})
		containerPorts = []corev1.ContainerPort{
			{Name: "slurmd", ContainerPort: ports.Slurmd, HostPort: ports.Slurmd},
			{Name: "ssh", ContainerPort: ports.SSH, HostPort: ports.SSH},
		}
	}
	// srun listens on these in whichever pod a user runs it: the slurmctld pod's shell.
	if role == layout.RoleSlurmctld {
		for p := ports.SrunFirst; p <= ports.SrunLast; p++ {
			containerPorts = append(containerPorts, corev1.ContainerPort{ContainerPort: p, HostPort: p})
		}
	}
	owner, mode, script := int32(0o400), int32(0o444), int32(0o555)
	pod := &corev1.Pod{
		ObjectMeta: m,
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   true,
			DNSPolicy:                     corev1.DNSClusterFirstWithHostNet,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(10)),
			Containers: []corev1.Container{{
				Name: role, Image: vc.Spec.Image, ImagePullPolicy: corev1.PullIfNotPresent,
				Env: env, Ports: containerPorts,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(podCPURequest), corev1.ResourceMemory: resource.MustParse(podMemoryRequest)}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "slurm-conf", MountPath: layout.ConfDir, ReadOnly: true},
					{Name: "munge-key", MountPath: layout.MungeKeyMountDir, ReadOnly: true},
					{Name: "ssh", MountPath: sshDir, ReadOnly: true},
					{Name: "spool", MountPath: layout.SpoolDir},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "slurm-conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(vc)}, DefaultMode: &mode,
					Items: []corev1.KeyToPath{{Key: layout.SlurmConfKey, Path: layout.SlurmConfKey}, {Key: layout.CgroupConfKey, Path: layout.CgroupConfKey},
						{Key: layout.JobSubmitLuaKey, Path: layout.JobSubmitLuaKey}, {Key: layout.TaskPrologKey, Path: layout.TaskPrologKey, Mode: &script}}}}},
				{Name: "munge-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: mungeSecretName(vc), DefaultMode: &owner}}},
				{Name: "ssh", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: sshSecretName(vc)}, Items: []corev1.KeyToPath{
						{Key: mpi.SecretPrivateKey, Path: mpi.IdentityFile, Mode: &owner},
						{Key: mpi.SecretPublicKey, Path: mpi.AuthorizedKeysFile}}}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(vc)}, Items: []corev1.KeyToPath{
						{Key: layout.SSHConfigKey, Path: mpi.ClientConfigFile}}}},
				}}}},
				{Name: "spool", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	// The shared file system, also the working directory: a shell of the pod, and so the jobs
	// it submits, start there (docs/slurm.md, "Shared file system").
	if sv := vc.Spec.SharedVolume; sv != nil {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: sharedVolumeName, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: sv.ClaimName}}})
		ctr := &pod.Spec.Containers[0]
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: sharedVolumeName, MountPath: sv.MountPath})
		ctr.WorkingDir = sv.MountPath
	}
	return pod
}

// ensurePods creates the pods the virtual cluster lacks and deletes its pods that are no longer
// wanted: on a node it no longer spans, made with another configuration or on another node, or
// ended. Deletions name the pod's UID as a precondition; a pod of a wanted name that the virtual
// cluster does not own is an error.
func (c *Controller) ensurePods(ctx context.Context, vc *v1alpha1.VirtualCluster, hash string, ports v1alpha1.VirtualClusterPorts, nodes []*corev1.Node, ctlNode string) error {
	want := desiredPods(vc, hash, ports, nodes, ctlNode)
	have, err := c.pods.Pods(vc.Namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.LabelVirtualCluster: vc.Name}))
	if err != nil {
		return err
	}
	for _, p := range have {
		if !metav1.IsControlledBy(p, vc) || p.DeletionTimestamp != nil {
			continue
		}
		w, wanted := want[p.Name]
		ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if wanted && !ended && p.Spec.NodeName == w.Spec.NodeName && p.Annotations[AnnotationConfigHash] == hash {
			continue
		}
		if err := c.deletePod(ctx, p); err != nil {
			return err
		}
	}
	for name, w := range want {
		p, err := c.pods.Pods(vc.Namespace).Get(name)
		switch {
		case err == nil:
			if err := owned(vc, "Pod", p); err != nil {
				return err
			}
			continue
		case !apierrors.IsNotFound(err):
			return err
		}
		if _, err := c.kube.CoreV1().Pods(vc.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create pod %s/%s: %w", vc.Namespace, name, err)
		}
	}
	return nil
}

func (c *Controller) deletePod(ctx context.Context, p *corev1.Pod) error {
	uid := types.UID(p.UID)
	err := c.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.log.Info("virtual cluster pod replaced", "pod", p.Namespace+"/"+p.Name)
	return nil
}
