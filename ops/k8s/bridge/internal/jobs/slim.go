package jobs

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SlimWorkload is the manager cache's transform of a Workload object: it drops the object's
// managed fields unless the object has admission checks, whose writers the checks package reads
// from them (checks.KeepForeignChecks, checks.Reconciler). Managed fields are most of a
// Workload's size, and every reconcile copies its object from the cache: in Kueue's scalability
// benchmark that copy was an eighth of the bridge's CPU. Writes keep the API server's managed
// fields (an update without them leaves them as they are).
func SlimWorkload(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if entries, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "admissionChecks"); entries != nil {
		if list, _ := entries.([]any); len(list) > 0 {
			return u, nil
		}
	}
	if meta, ok := u.Object["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	return u, nil
}

// WorkloadCacheObject names the Workload objects of the manager's cache (for its options).
func WorkloadCacheObject() client.Object { return newWorkloadObject() }
