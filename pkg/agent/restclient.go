package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// coreClient reaches the core/v1 API with a scheme that knows only core/v1: the agent reads pods
// and writes events, nothing else, and client-go's typed clientset would link and register every
// API group of Kubernetes (tens of megabytes of resident memory for types never used).
type coreClient struct {
	rest   *rest.RESTClient
	params runtime.ParameterCodec
	scheme *runtime.Scheme
}

var (
	_ PodClient        = restPods{}
	_ record.EventSink = restEvents{}
)

func newCoreClient(cfg *rest.Config) (*coreClient, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("core/v1 scheme: %w", err)
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("core/v1 API client: %w", err)
	}
	return &coreClient{rest: rc, params: runtime.NewParameterCodec(scheme), scheme: scheme}, nil
}

// restPods lists and watches pods of every namespace.
type restPods struct{ c *coreClient }

func (p restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.c.rest.Get().Resource("pods").VersionedParams(&opts, p.c.params).Do(ctx).Into(out)
	return out, err
}

func (p restPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.c.rest.Get().Resource("pods").VersionedParams(&opts, p.c.params).Watch(ctx)
}

// restEvents is the event broadcaster's sink. The broadcaster calls it from its own goroutine,
// never from the agent's decisions.
type restEvents struct{ c *coreClient }

func (e restEvents) Create(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.c.rest.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(context.Background()).Into(out)
	return out, err
}

func (e restEvents) Update(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.c.rest.Put().Namespace(ev.Namespace).Resource("events").Name(ev.Name).Body(ev).Do(context.Background()).Into(out)
	return out, err
}

func (e restEvents) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.c.rest.Patch(types.StrategicMergePatchType).Namespace(ev.Namespace).Resource("events").Name(ev.Name).
		Body(data).Do(context.Background()).Into(out)
	return out, err
}
