package migration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const testCRD = "workloads.kueue.x-k8s.io"

var workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

// crd: the Workload CRD storing v1beta2, with storedVersions.
func crd(storedVersions ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: testCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kueue.x-k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Workload", ListKind: "WorkloadList", Plural: "workloads"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta2", Served: true, Storage: true},
				{Name: "v1beta1", Served: true},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: storedVersions},
	}
}

func workload(name string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(workloadGVK)
	w.SetNamespace("default")
	w.SetName(name)
	return w
}

// newClient: a fake API server holding the CRD and workloads named names, with funcs
// intercepting its calls.
func newClient(t *testing.T, definition *apiextensionsv1.CustomResourceDefinition, names []string, funcs interceptor.Funcs) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objects := []client.Object{definition}
	for _, name := range names {
		objects = append(objects, workload(name))
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).
		WithStatusSubresource(definition).WithInterceptorFuncs(funcs).Build()
}

func storedVersionsOf(t *testing.T, c client.Client) []string {
	t.Helper()
	var got apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: testCRD}, &got); err != nil {
		t.Fatal(err)
	}
	return got.Status.StoredVersions
}

func conflict(name string) error {
	return apierrors.NewConflict(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}, name,
		fmt.Errorf("the object has been modified"))
}

func TestMigrateWritesEveryObjectBackThenSetsStoredVersions(t *testing.T) {
	var updated []string
	c := newClient(t, crd("v1beta1", "v1beta2"), []string{"a", "b", "c"}, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			// The object is written as read at the storage version.
			if gvk := obj.GetObjectKind().GroupVersionKind(); gvk != workloadGVK {
				t.Errorf("updated %s as %v, not at the storage version", obj.GetName(), gvk)
			}
			updated = append(updated, obj.GetName())
			return c.Update(ctx, obj, opts...)
		},
	})
	var progress []Result
	results, err := Migrate(context.Background(), c, []string{testCRD}, func(r Result) { progress = append(progress, r) })
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(updated)
	if !slices.Equal(updated, []string{"a", "b", "c"}) {
		t.Errorf("updated %v, not every object once", updated)
	}
	want := Result{CRD: testCRD, Kind: "Workload", StorageVersion: "v1beta2", Objects: 3, Rewritten: 3,
		StoredVersionsBefore: []string{"v1beta1", "v1beta2"}, StoredVersionsAfter: []string{"v1beta2"}}
	if len(results) != 1 || fmt.Sprint(results[0]) != fmt.Sprint(want) || len(progress) != 1 {
		t.Errorf("results %+v, progress %+v; want %+v once", results, progress, want)
	}
	if got := storedVersionsOf(t, c); !slices.Equal(got, []string{"v1beta2"}) {
		t.Errorf("storedVersions %v after the migration, not [v1beta2]", got)
	}
}

func TestMigrateLeavesStoredVersionsAloneWhenAlreadyTheStorageVersion(t *testing.T) {
	patches := 0
	c := newClient(t, crd("v1beta2"), []string{"a"}, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	if _, err := Migrate(context.Background(), c, []string{testCRD}, func(Result) {}); err != nil {
		t.Fatal(err)
	}
	if patches != 0 {
		t.Errorf("%d patches of the CRD's status whose storedVersions was already [v1beta2]", patches)
	}
}

func TestMigrateRetriesAConflictAfterReadingTheObjectAgain(t *testing.T) {
	conflicts, gets := 2, 0
	c := newClient(t, crd("v1beta1", "v1beta2"), []string{"a"}, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if conflicts > 0 {
				conflicts--
				return conflict(obj.GetName())
			}
			return c.Update(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == "a" {
				gets++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	results, err := Migrate(context.Background(), c, []string{testCRD}, func(Result) {})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Conflicts != 2 || results[0].Rewritten != 1 || gets != 2 {
		t.Errorf("conflicts %d, rewritten %d, reads again %d; want 2, 1, 2", results[0].Conflicts, results[0].Rewritten, gets)
	}
	if got := storedVersionsOf(t, c); !slices.Equal(got, []string{"v1beta2"}) {
		t.Errorf("storedVersions %v, not [v1beta2]", got)
	}
}

func TestMigrateFailsNamingTheObjectAndKeepsStoredVersions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		update func(name string) error
		want   string
	}{
		{"refused", func(string) error { return fmt.Errorf("admission webhook refused it") }, "admission webhook refused it"},
		{"conflicts without end", conflict, fmt.Sprintf("still changed by another writer after %d conflicts", ConflictRetriesMax)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, crd("v1beta1", "v1beta2"), []string{"a", "b"}, interceptor.Funcs{
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if obj.GetName() == "b" {
						return tc.update(obj.GetName())
					}
					return c.Update(ctx, obj, opts...)
				},
			})
			_, err := Migrate(context.Background(), c, []string{testCRD}, func(Result) {})
			if err == nil {
				t.Fatal("the migration succeeded although an object was not written")
			}
			for _, part := range []string{"rewriting Workload default/b (" + testCRD + ") at v1beta2", tc.want} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
			if got := storedVersionsOf(t, c); !slices.Equal(got, []string{"v1beta1", "v1beta2"}) {
				t.Errorf("storedVersions %v after a failed migration; it must still list v1beta1", got)
			}
		})
	}
}

func TestMigrateSkipsAnObjectDeletedMeanwhile(t *testing.T) {
	c := newClient(t, crd("v1beta1", "v1beta2"), []string{"a", "gone"}, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if obj.GetName() == "gone" {
				return apierrors.NewNotFound(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}, "gone")
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	results, err := Migrate(context.Background(), c, []string{testCRD}, func(Result) {})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Rewritten != 1 {
		t.Errorf("rewritten %d, want 1 (the deleted object is not stored)", results[0].Rewritten)
	}
}

func TestMigrateRefusesWhenTheStorageVersionChangedMeanwhile(t *testing.T) {
	// The CRD switches its storage to v1beta1 while the objects are written back.
	c := newClient(t, crd("v1beta1", "v1beta2"), []string{"a"}, interceptor.Funcs{
		Update: func(ctx context.Context, inner client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := inner.Update(ctx, obj, opts...); err != nil {
				return err
			}
			var definition apiextensionsv1.CustomResourceDefinition
			if err := inner.Get(ctx, client.ObjectKey{Name: testCRD}, &definition); err != nil {
				return err
			}
			definition.Spec.Versions[0].Storage, definition.Spec.Versions[1].Storage = false, true
			return inner.Update(ctx, &definition)
		},
	})
	_, err := Migrate(context.Background(), c, []string{testCRD}, func(Result) {})
	if err == nil || !strings.Contains(err.Error(), "changed from v1beta2 to v1beta1 during the migration") {
		t.Fatalf("error %v, want the storage version's change named", err)
	}
	if got := storedVersionsOf(t, c); !slices.Equal(got, []string{"v1beta1", "v1beta2"}) {
		t.Errorf("storedVersions %v; it must be left alone", got)
	}
}
