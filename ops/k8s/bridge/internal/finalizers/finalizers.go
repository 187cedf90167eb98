// Package finalizers adds and removes one of the bridge's finalizers by a merge patch of
// metadata.finalizers alone: the Jobs' (admission-ledger.io/workload) and the definitions'
// (admission-ledger.io/ledger), which hold an object's deletion until the ledger recorded it.
package finalizers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Add puts finalizer on obj unless it carries it already. kind names obj in the error.
func Add(ctx context.Context, c client.Client, obj client.Object, kind, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	return patch(ctx, c, obj, kind, finalizer, "adding", controllerutil.AddFinalizer)
}

// Remove takes finalizer off obj if it carries it.
func Remove(ctx context.Context, c client.Client, obj client.Object, kind, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	return patch(ctx, c, obj, kind, finalizer, "removing", controllerutil.RemoveFinalizer)
}

func patch(ctx context.Context, c client.Client, obj client.Object, kind, finalizer, doing string,
	change func(client.Object, string) bool) error {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%s finalizer %s: %s %s cannot be copied", doing, finalizer, kind,
			client.ObjectKeyFromObject(obj))
	}
	change(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("%s finalizer %s on %s %s: %w", doing, finalizer, kind,
			client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
