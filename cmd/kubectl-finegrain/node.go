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
	u, err := client.Resource(nrt.GroupVersionResource).Get(ctx, opts.node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s has no NodeResourceTopology (%w); is finegrain's node agent running there? kubectl finegrain nodes lists the nodes that have one", opts.node, err)
	}
	if err != nil {
		return explain(fmt.Errorf("read NodeResourceTopology %s: %w", opts.node, err))
	}
	o, err := nrt.FromUnstructured(u)
	if err != nil {
		return err
	}
	v, err := inspect.FromNRT(o)
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
