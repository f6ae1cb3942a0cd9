package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/finegrain-dev/finegrain/pkg/inspect"
	"github.com/finegrain-dev/finegrain/pkg/report/nrt"
)

func runNode(client dynamic.Interface, opts options, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	v, err := nodePins(ctx, client, opts.name)
	if err != nil {
		return err
	}
	if opts.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return inspect.WriteTable(stdout, v, opts.now())
}

// nodePins reads the pins view of a node from its NodeResourceTopology object.
func nodePins(ctx context.Context, client dynamic.Interface, node string) (inspect.Pins, error) {
	u, err := client.Resource(nrt.GroupVersionResource).Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return inspect.Pins{}, fmt.Errorf("node %s has no NodeResourceTopology (%w); is finegrain's node agent running there? kubectl finegrain nodes lists the nodes that have one", node, err)
	}
	if err != nil {
		return inspect.Pins{}, explain(fmt.Errorf("read NodeResourceTopology %s: %w", node, err))
	}
	o, err := nrt.FromUnstructured(u)
	if err != nil {
		return inspect.Pins{}, err
	}
	// The Node is not read (a user of this command need not have the right): the lists are read
	// within the largest bound any node can have.
	return inspect.FromNRT(o, nrt.MaxCPUs(nil))
}
