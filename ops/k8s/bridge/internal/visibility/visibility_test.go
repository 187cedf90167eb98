package visibility

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"admission-ledger/bridge/internal/ledger"
)

type fakeLedger struct {
	queries []ledger.Query
	answer  string
	err     error
}

func (f *fakeLedger) GetWith(_ context.Context, kind, format string, q ledger.Query) (string, error) {
	if kind != "pendingworkloads" || format != "json" {
		return "", &ledger.Refused{Code: ledger.CodeInvalidArgument, Message: "kind " + kind}
	}
	f.queries = append(f.queries, q)
	return f.answer, f.err
}

// allowOnly allows one user.
type allowOnly struct {
	user string
	asks []string
}

func (a *allowOnly) Allowed(_ context.Context, u User, namespace, resource, name string) (bool, string, error) {
	a.asks = append(a.asks, u.Name+" "+strings.Join(u.Groups, ",")+" "+namespace+" "+resource+" "+name)
	return u.Name == a.user, "", nil
}

// objects: one Workload object.
type objects struct{ obj *unstructured.Unstructured }

func (o objects) Get(_ context.Context, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	if o.obj == nil || key.Name != o.obj.GetName() || key.Namespace != o.obj.GetNamespace() {
		return apierrors.NewNotFound(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}, key.Name)
	}
	o.obj.DeepCopyInto(out.(*unstructured.Unstructured))
	return nil
}

func (o objects) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

const ledgerAnswer = `{"apiVersion":"visibility.kueue.x-k8s.io/v1beta2","kind":"PendingWorkloadsSummary","metadata":{},
"items":[{"metadata":{"name":"job-a","namespace":"team-a","creationTimestamp":"2026-12-06T01:00:00Z"},"priority":5,
"localQueueName":"lq","positionInClusterQueue":3,"positionInLocalQueue":1},
{"metadata":{"name":"wl-b","namespace":"team-b","creationTimestamp":"2026-12-06T02:00:00Z"},"priority":0,
"localQueueName":"lq-b","positionInClusterQueue":4,"positionInLocalQueue":0}]}`

func newHandler() (*Handler, *fakeLedger, *allowOnly) {
	l := &fakeLedger{answer: ledgerAnswer}
	a := &allowOnly{user: "alice"}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(workloadGVK)
	obj.SetNamespace("team-a")
	obj.SetName("job-a")
	obj.SetCreationTimestamp(metav1.Date(2026, 12, 6, 0, 59, 58, 0, metav1.Now().Location()))
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "a", UID: "u-1",
		Controller: new(bool)}})
	return &Handler{Ledger: l, Authorizer: a, Workloads: objects{obj},
		FrontProxy: FrontProxy{AllowedNames: []string{"front-proxy-client"}, UsernameHeaders: []string{"X-Remote-User"},
			GroupHeaders: []string{"X-Remote-Group"}, ExtraPrefixes: []string{"X-Remote-Extra-"}}}, l, a
}

// get sends path as the front proxy (common name cn) speaking for user.
func get(h *Handler, path, cn, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if cn != "" {
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
	}
	if user != "" {
		r.Header.Set("X-Remote-User", user)
		r.Header.Add("X-Remote-Group", "system:authenticated")
		r.Header.Add("X-Remote-Group", "team-a")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func status(t *testing.T, w *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || s.Kind != "Status" {
		t.Fatalf("not a Status: %s (%v)", w.Body.String(), err)
	}
	return s
}

const cqPath = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/gpu/pendingworkloads"

func TestOnlyTheFrontProxyIsHeard(t *testing.T) {
	h, l, _ := newHandler()
	for _, c := range []struct{ name, cn, user string }{
		{"no client certificate", "", "alice"},
		{"a certificate of another name", "alice", "alice"},
		{"no user named", "front-proxy-client", ""},
	} {
		w := get(h, cqPath, c.cn, c.user)
		if w.Code != http.StatusUnauthorized || status(t, w).Reason != metav1.StatusReasonUnauthorized {
			t.Errorf("%s: %d %s, want 401 Unauthorized", c.name, w.Code, w.Body.String())
		}
	}
	if len(l.queries) != 0 {
		t.Errorf("the ledger was asked %v for an unauthenticated request", l.queries)
	}
}

func TestPendingWorkloadsOfAClusterQueueAsKueueAnswers(t *testing.T) {
	h, l, a := newHandler()
	w := get(h, cqPath+"?limit=2&offset=3", "front-proxy-client", "alice")
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	if want := []ledger.Query{{ClusterQueue: "gpu", Limit: 2, Offset: 3}}; !reflect.DeepEqual(l.queries, want) {
		t.Errorf("asked the ledger %+v, want %+v", l.queries, want)
	}
	if want := []string{"alice system:authenticated,team-a  clusterqueues gpu"}; !reflect.DeepEqual(a.asks, want) {
		t.Errorf("authorization asked %q, want %q", a.asks, want)
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// Kueue's shape, field by field: owners and creation time from the Workload object (a
	// controller flag is not listed), the ledger's when the cache has no object.
	want := map[string]any{"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
		"metadata": map[string]any{}, "items": []any{
			map[string]any{"metadata": map[string]any{"name": "job-a", "namespace": "team-a",
				"creationTimestamp": "2026-12-06T00:59:58Z", "ownerReferences": []any{
					map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "u-1"}}},
				"priority": 5.0, "localQueueName": "lq", "positionInClusterQueue": 3.0, "positionInLocalQueue": 1.0},
			map[string]any{"metadata": map[string]any{"name": "wl-b", "namespace": "team-b",
				"creationTimestamp": "2026-12-06T02:00:00Z"},
				"priority": 0.0, "localQueueName": "lq-b", "positionInClusterQueue": 4.0, "positionInLocalQueue": 0.0}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answer\n%s\nwant\n%v", w.Body.String(), want)
	}
}

func TestLimitAndOffsetAsKueue(t *testing.T) {
	h, l, _ := newHandler()
	lqPath := "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/lq/pendingworkloads"
	for _, q := range []string{"", "?limit=0", "?limit=200000&offset=-4"} {
		if w := get(h, lqPath+q, "front-proxy-client", "alice"); w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, w.Code, w.Body.String())
		}
	}
	want := []ledger.Query{{LocalQueue: "team-a/lq", Limit: DefaultLimit}, {LocalQueue: "team-a/lq", Limit: DefaultLimit},
		{LocalQueue: "team-a/lq", Limit: MaxLimit}}
	if !reflect.DeepEqual(l.queries, want) {
		t.Errorf("asked the ledger %+v, want %+v", l.queries, want)
	}
	w := get(h, lqPath+"?limit=-1", "front-proxy-client", "alice")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"items":[]`) || len(l.queries) != 3 {
		t.Errorf("limit=-1: %d %s after %d queries; want no items and no question", w.Code, w.Body.String(), len(l.queries))
	}
	w = get(h, lqPath+"?offset=two", "front-proxy-client", "alice")
	if w.Code != http.StatusBadRequest || !strings.Contains(status(t, w).Message, `offset="two"`) {
		t.Errorf("offset=two: %d %s", w.Code, w.Body.String())
	}
}

func TestRefusalsAsTheAPIServerWords(t *testing.T) {
	h, l, _ := newHandler()
	w := get(h, "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-b/localqueues/lq-b/pendingworkloads", "front-proxy-client", "bob")
	s := status(t, w)
	if w.Code != http.StatusForbidden || s.Message != `localqueues.visibility.kueue.x-k8s.io "lq-b" is forbidden: `+
		`User "bob" cannot get resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in the namespace "team-b"` {
		t.Errorf("forbidden: %d %+v", w.Code, s)
	}
	if len(l.queries) != 0 {
		t.Errorf("the ledger was asked %v for a forbidden request", l.queries)
	}
	l.err = &ledger.Refused{Code: ledger.CodeNotFound, Message: `clusterqueue "gpu" not found`}
	w = get(h, cqPath, "front-proxy-client", "alice")
	s = status(t, w)
	if w.Code != http.StatusNotFound || s.Message != `clusterqueue.visibility.kueue.x-k8s.io "gpu" not found` ||
		s.Details == nil || s.Details.Kind != "clusterqueue" {
		t.Errorf("not found: %d %+v", w.Code, s)
	}
	if w := get(h, "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/gpu", "front-proxy-client", "alice"); w.Code != http.StatusNotFound {
		t.Errorf("a ClusterQueue itself: %d, want 404 (only its pendingworkloads are served)", w.Code)
	}
}

func TestDiscoveryListsWhatKueueServes(t *testing.T) {
	h, _, _ := newHandler()
	w := get(h, "/apis/visibility.kueue.x-k8s.io/v1beta2", "front-proxy-client", "system:kube-aggregator")
	var list metav1.APIResourceList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name+":"+strings.Join(r.Verbs, ","))
	}
	want := []string{"clusterqueues:", "clusterqueues/pendingworkloads:get", "localqueues:", "localqueues/pendingworkloads:get"}
	if list.GroupVersion != "visibility.kueue.x-k8s.io/v1beta2" || !reflect.DeepEqual(names, want) {
		t.Errorf("discovery %s %v, want %v", list.GroupVersion, names, want)
	}
}

func TestFrontProxyFromTheAPIServersConfigMap(t *testing.T) {
	if _, err := FrontProxyFromConfigMap(map[string]string{"client-ca-file": "x"}); err == nil ||
		!strings.Contains(err.Error(), "--requestheader-client-ca-file") {
		t.Errorf("no front proxy: %v", err)
	}
	data := map[string]string{"requestheader-client-ca-file": testCA, "requestheader-allowed-names": `["front-proxy-client"]`,
		"requestheader-username-headers": `["X-Remote-User"]`, "requestheader-group-headers": `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`}
	f, err := FrontProxyFromConfigMap(data)
	if err != nil || !reflect.DeepEqual(f.AllowedNames, []string{"front-proxy-client"}) || f.UsernameHeaders[0] != "X-Remote-User" {
		t.Errorf("%+v %v", f, err)
	}
	data["requestheader-group-headers"] = "X-Remote-Group"
	if _, err := FrontProxyFromConfigMap(data); err == nil || !strings.Contains(err.Error(), "requestheader-group-headers") {
		t.Errorf("malformed list: %v", err)
	}
}

// testCA: any self-signed certificate (openssl req -x509, P-256).
const testCA = `-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIUVucrgt+PL6T9qoUH9RwIz9P/P4QwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKdGVzdCBwcm94eTAeFw0yNjEyMDYwMjQ3MjdaFw0zNjEyMDMw
MjQ3MjdaMBUxEzARBgNVBAMMCnRlc3QgcHJveHkwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAT42JyLvCZ+vFupfHPM2ewjGoFHIS5b+gYau1XSCnU4G2aHotsxAyPK
bms1AMtcLfCRtB05AzQWuSTvAK2jm8+to1MwUTAdBgNVHQ4EFgQUXtHUZ94sdtB/
h2yDHwWwkVak53wwHwYDVR0jBBgwFoAUXtHUZ94sdtB/h2yDHwWwkVak53wwDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiASL1CuLXorFOgB9RpWQWf3
2V0O/pfbn/QUfmcEkIJ5AgIhAIcAHAxNEHXlnXjrhLx1Gatsf9+zp+hN/Y1sR98p
/h03
-----END CERTIFICATE-----
`
