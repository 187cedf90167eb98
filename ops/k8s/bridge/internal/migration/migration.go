// Package migration moves the objects of our kueue.x-k8s.io CRDs to their storage version, as
// kube-storage-version-migrator does: every object is read at the storage version and written
// back unchanged with an update, so that the API server, which decodes it from the version it
// was stored in, encodes it again in the storage version; then the CRD's status.storedVersions
// is set to the storage version alone, after which an older version can be removed from the
// CRD (docs/k8s.md, "Storage migration").
package migration

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CRDs are the CRDs of ops/k8s/crds/, in the order they are migrated (definitions first).
var CRDs = []string{
	"resourceflavors.kueue.x-k8s.io",
	"cohorts.kueue.x-k8s.io",
	"clusterqueues.kueue.x-k8s.io",
	"localqueues.kueue.x-k8s.io",
	"admissionchecks.kueue.x-k8s.io",
	"workloadpriorityclasses.kueue.x-k8s.io",
	"workloads.kueue.x-k8s.io",
}

// ListPageObjectsMax bounds the objects read by one list call (the rest come page by page).
const ListPageObjectsMax = 500

// ConflictRetriesMax bounds the updates of one object that fail with a conflict (another writer
// changed it between our read and our write) before the migration gives up on it.
const ConflictRetriesMax = 10

// Result is what the migration did for one CRD.
type Result struct {
	CRD            string `json:"crd"`
	Kind           string `json:"kind"`
	StorageVersion string `json:"storageVersion"`
	// Objects is how many objects were listed and written back.
	Objects int `json:"objects"`
	// Rewritten is how many of them the API server stored again (their resourceVersion
	// changed): those that were not yet stored as the storage version. An update that changes
	// nothing of an object already stored in the storage version is not written to etcd.
	Rewritten int `json:"rewritten"`
	// Conflicts is how many updates failed because another writer came first (then retried
	// after reading the object again).
	Conflicts            int      `json:"conflicts"`
	StoredVersionsBefore []string `json:"storedVersionsBefore"`
	StoredVersionsAfter  []string `json:"storedVersionsAfter"`
}

// Migrate migrates each CRD in turn (see the package comment), calling progress with each CRD's
// result when it is done. It stops at the first failure, returning the results so far and an
// error that names the CRD, and the object if one failed. Running it again is harmless: objects
// already stored in the storage version are not written again.
// REQUIRES: c's scheme knows apiextensions.k8s.io/v1; c may update the CRDs' objects and patch
// customresourcedefinitions/status. The conversion webhook must answer for converted CRDs.
func Migrate(ctx context.Context, c client.Client, crds []string, progress func(Result)) ([]Result, error) {
	results := make([]Result, 0, len(crds))
	for _, name := range crds {
		result, err := migrateCRD(ctx, c, name)
		if err != nil {
			return results, err
		}
		results = append(results, result)
		progress(result)
	}
	return results, nil
}

func migrateCRD(ctx context.Context, c client.Client, name string) (Result, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
		return Result{}, fmt.Errorf("reading the CRD %s: %w", name, err)
	}
	storage, err := storageVersion(&crd)
	if err != nil {
		return Result{}, err
	}
	result := Result{CRD: name, Kind: crd.Spec.Names.Kind, StorageVersion: storage,
		StoredVersionsBefore: slices.Clone(crd.Status.StoredVersions)}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage,
		Kind: crd.Spec.Names.ListKind})
	for page := ""; ; {
		if err := c.List(ctx, list, client.Limit(ListPageObjectsMax), client.Continue(page)); err != nil {
			return result, fmt.Errorf("listing %s at %s (after %d objects; running the migration again "+
				"resumes harmlessly): %w", name, storage, result.Objects, err)
		}
		for i := range list.Items {
			object := &list.Items[i]
			rewritten, conflicts, err := rewrite(ctx, c, object)
			result.Conflicts += conflicts
			if err != nil {
				return result, fmt.Errorf("rewriting %s %s (%s) at %s: %w", crd.Spec.Names.Kind,
					objectName(object), name, storage, err)
			}
			result.Objects++
			if rewritten {
				result.Rewritten++
			}
		}
		page = list.GetContinue()
		if page == "" {
			break
		}
	}
	after, err := setStoredVersions(ctx, c, name, storage)
	if err != nil {
		return result, err
	}
	result.StoredVersionsAfter = after
	return result, nil
}

// rewrite updates object as read, again after reading it anew on a conflict. rewritten: the API
// server stored it again. An object deleted meanwhile is left alone: nothing of it is stored.
func rewrite(ctx context.Context, c client.Client, object *unstructured.Unstructured) (rewritten bool, conflicts int, err error) {
	key := client.ObjectKeyFromObject(object)
	for {
		before := object.GetResourceVersion()
		err := c.Update(ctx, object)
		switch {
		case err == nil:
			return object.GetResourceVersion() != before, conflicts, nil
		case apierrors.IsNotFound(err):
			return false, conflicts, nil
		case !apierrors.IsConflict(err):
			return false, conflicts, err
		}
		conflicts++
		if conflicts > ConflictRetriesMax {
			return false, conflicts, fmt.Errorf("still changed by another writer after %d conflicts: %w",
				ConflictRetriesMax, err)
		}
		if err := c.Get(ctx, key, object); err != nil {
			if apierrors.IsNotFound(err) {
				return false, conflicts, nil
			}
			return false, conflicts, fmt.Errorf("reading it again after a conflict: %w", err)
		}
	}
}

// setStoredVersions sets the CRD's status.storedVersions to [storage] unless it is so already,
// and returns it. The patch holds the resourceVersion read, and the storage version is read
// again first: if the CRD's storage version changed during the migration, objects may have been
// stored in another version since, and the CRD is left as it is.
func setStoredVersions(ctx context.Context, c client.Client, name, storage string) ([]string, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
		return nil, fmt.Errorf("reading the CRD %s again: %w", name, err)
	}
	now, err := storageVersion(&crd)
	if err != nil {
		return nil, err
	}
	if now != storage {
		return nil, fmt.Errorf("the storage version of the CRD %s changed from %s to %s during the "+
			"migration; run it again", name, storage, now)
	}
	want := []string{storage}
	if slices.Equal(crd.Status.StoredVersions, want) {
		return want, nil
	}
	base := crd.DeepCopy()
	crd.Status.StoredVersions = want
	if err := c.Status().Patch(ctx, &crd, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("setting status.storedVersions of the CRD %s to [%s] (was %v): %w",
			name, storage, base.Status.StoredVersions, err)
	}
	return slices.Clone(crd.Status.StoredVersions), nil
}

// storageVersion is the one version of crd with storage: true.
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name, nil
		}
	}
	return "", fmt.Errorf("the CRD %s has no storage version", crd.Name)
}

func objectName(object *unstructured.Unstructured) string {
	if object.GetNamespace() == "" {
		return object.GetName()
	}
	return object.GetNamespace() + "/" + object.GetName()
}
