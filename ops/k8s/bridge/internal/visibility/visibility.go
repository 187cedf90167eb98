// Package visibility serves Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2) from the
// ledger: the pending workloads of a ClusterQueue or a LocalQueue in the order the ledger would
// admit them, with their positions, as an aggregated API behind the cluster's API server
// (docs/k8s.md, "Visibility"). The API server authenticates the caller and forwards the request
// with a front-proxy client certificate; the bridge asks the API server whether that user may
// get the subresource (a SubjectAccessReview), then asks admitd.
package visibility

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"admission-ledger/bridge/internal/ledger"
)

// The group and version Kueue v0.17 serves its visibility API as, and its limits.
const (
	Group   = "visibility.kueue.x-k8s.io"
	Version = "v1beta2"
	// DefaultLimit is the number of pending workloads answered without ?limit= (or with 0).
	DefaultLimit = 1000
	// MaxLimit bounds ?limit=.
	MaxLimit = 100_000
	// Subresource is the one thing the API serves, of clusterqueues and localqueues.
	Subresource = "pendingworkloads"
)

// Ledger answers the ledger's `get pendingworkloads -o json` (ops/views/query.h).
type Ledger interface {
	GetWith(ctx context.Context, kind, format string, q ledger.Query) (string, error)
}

// Authorizer says whether u may get resource/pendingworkloads named name in namespace ("" for
// a ClusterQueue), and if not, why.
type Authorizer interface {
	Allowed(ctx context.Context, u User, namespace, resource, name string) (bool, string, error)
}

// PendingWorkload is Kueue's visibility.kueue.x-k8s.io/v1beta2 PendingWorkload.
type PendingWorkload struct {
	metav1.ObjectMeta      `json:"metadata,omitempty"`
	Priority               int32  `json:"priority"`
	LocalQueueName         string `json:"localQueueName"`
	PositionInClusterQueue int32  `json:"positionInClusterQueue"`
	PositionInLocalQueue   int32  `json:"positionInLocalQueue"`
}

// PendingWorkloadsSummary is Kueue's, the answer to both queries.
type PendingWorkloadsSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Items             []PendingWorkload `json:"items"`
}

// Handler serves the API's discovery and its two queries.
type Handler struct {
	Ledger     Ledger
	Authorizer Authorizer
	FrontProxy FrontProxy
	// Workloads reads Workload objects (the manager's cache): a pending workload's owners and
	// creation time are its object's, as Kueue answers them.
	Workloads client.Reader
}

var workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, err := h.FrontProxy.Authenticate(r)
	if err != nil {
		ctrl.Log.WithName("visibility").V(1).Info("unauthenticated request", "path", r.URL.Path, "reason", err.Error())
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized", nil)
		return
	}
	if r.Method != http.MethodGet {
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not supported: the visibility API answers GET only", r.Method), nil)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.URL.Path == "/apis":
		writeJSON(w, http.StatusOK, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{apiGroup()}})
	case len(parts) == 2 && parts[0] == "apis" && parts[1] == Group:
		writeJSON(w, http.StatusOK, apiGroup())
	case len(parts) == 3 && parts[0] == "apis" && parts[1] == Group && parts[2] == Version:
		writeJSON(w, http.StatusOK, apiResources())
	case len(parts) == 6 && parts[0] == "apis" && parts[1] == Group && parts[2] == Version &&
		parts[3] == "clusterqueues" && parts[5] == Subresource:
		h.pending(w, r, user, "", "clusterqueues", parts[4])
	case len(parts) == 8 && parts[0] == "apis" && parts[1] == Group && parts[2] == Version &&
		parts[3] == "namespaces" && parts[5] == "localqueues" && parts[7] == Subresource:
		h.pending(w, r, user, parts[4], "localqueues", parts[6])
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource", nil)
	}
}

func apiGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version}
	return metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: Group,
		Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

// apiResources lists what Kueue's server lists: the two queues (which serve nothing
// themselves) and their pendingworkloads subresource.
func apiResources() metav1.APIResourceList {
	list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version}
	for _, r := range []struct {
		name, singular, kind string
		namespaced           bool
	}{{"clusterqueues", "clusterqueue", "ClusterQueue", false}, {"localqueues", "localqueue", "LocalQueue", true}} {
		list.APIResources = append(list.APIResources,
			metav1.APIResource{Name: r.name, SingularName: r.singular, Namespaced: r.namespaced, Kind: r.kind, Verbs: metav1.Verbs{}},
			metav1.APIResource{Name: r.name + "/" + Subresource, Namespaced: r.namespaced, Kind: "PendingWorkloadsSummary", Verbs: metav1.Verbs{"get"}})
	}
	return list
}

// pending answers GET .../clusterqueues/NAME/pendingworkloads (namespace "") and
// .../namespaces/NAMESPACE/localqueues/NAME/pendingworkloads.
func (h *Handler) pending(w http.ResponseWriter, r *http.Request, u User, namespace, resource, name string) {
	singular := strings.TrimSuffix(resource, "s")
	limit, offset, err := limitOffset(r)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil)
		return
	}
	allowed, reason, err := h.Authorizer.Allowed(r.Context(), u, namespace, resource, name)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError,
			"asking the API server whether "+u.Name+" may read this: "+err.Error(), nil)
		return
	}
	if !allowed {
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, forbidden(u, namespace, resource, name, reason),
			&metav1.StatusDetails{Name: name, Group: Group, Kind: resource})
		return
	}
	summary := PendingWorkloadsSummary{TypeMeta: metav1.TypeMeta{Kind: "PendingWorkloadsSummary", APIVersion: Group + "/" + Version},
		Items: []PendingWorkload{}}
	if limit > 0 {
		q := ledger.Query{ClusterQueue: name, Limit: uint64(limit), Offset: uint64(offset)}
		if namespace != "" {
			q = ledger.Query{LocalQueue: namespace + "/" + name, Limit: uint64(limit), Offset: uint64(offset)}
		}
		text, err := h.Ledger.GetWith(r.Context(), "pendingworkloads", "json", q)
		var refused *ledger.Refused
		switch {
		case errors.As(err, &refused) && refused.Code == ledger.CodeNotFound:
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
				fmt.Sprintf("%s.%s %q not found", singular, Group, name),
				&metav1.StatusDetails{Name: name, Group: Group, Kind: singular})
			return
		case err != nil:
			writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the ledger did not answer: "+err.Error(), nil)
			return
		}
		if err := json.Unmarshal([]byte(text), &summary); err != nil {
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the ledger's answer: "+err.Error(), nil)
			return
		}
		h.fromObjects(r.Context(), summary.Items)
	}
	writeJSON(w, http.StatusOK, summary)
}

// fromObjects gives each item its Workload object's owners (apiVersion, kind, name and uid, as
// Kueue lists them) and creation time; an item whose object the cache lacks keeps the ledger's.
func (h *Handler) fromObjects(ctx context.Context, items []PendingWorkload) {
	for i := range items {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(workloadGVK)
		if err := h.Workloads.Get(ctx, types.NamespacedName{Namespace: items[i].Namespace, Name: items[i].Name}, obj); err != nil {
			continue
		}
		items[i].CreationTimestamp = obj.GetCreationTimestamp()
		items[i].OwnerReferences = nil
		for _, ref := range obj.GetOwnerReferences() {
			items[i].OwnerReferences = append(items[i].OwnerReferences,
				metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID})
		}
	}
}

// limitOffset reads ?limit= and ?offset= as Kueue does: limit 0 or absent is DefaultLimit, a
// negative one none, at most MaxLimit; a negative offset is 0. Errors: a value not a number.
func limitOffset(r *http.Request) (int64, int64, error) {
	values := map[string]int64{"limit": 0, "offset": 0}
	for key := range values {
		text := r.URL.Query().Get(key)
		if text == "" {
			continue
		}
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s=%q: not an integer", key, text)
		}
		values[key] = v
	}
	limit, offset := values["limit"], max(values["offset"], 0)
	if limit == 0 {
		limit = DefaultLimit
	}
	return min(max(limit, 0), MaxLimit), offset, nil
}

// forbidden is the API server's message for a refused request, so kubectl prints the same.
func forbidden(u User, namespace, resource, name, reason string) string {
	scope := "at the cluster scope"
	if namespace != "" {
		scope = fmt.Sprintf("in the namespace %q", namespace)
	}
	message := fmt.Sprintf("%s.%s %q is forbidden: User %q cannot get resource %q in API group %q %s",
		resource, Group, name, u.Name, resource+"/"+Subresource, Group, scope)
	if reason != "" {
		message += ": " + reason
	}
	return message
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string, details *metav1.StatusDetails) {
	writeJSON(w, code, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: message, Reason: reason, Details: details, Code: int32(code)})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	text, err := json.Marshal(body)
	if err != nil {
		code, text = http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(text)
}

// SubjectAccessReviews asks the API server, as the aggregated API servers' delegated
// authorization does (the bridge needs system:auth-delegator's create of subjectaccessreviews).
type SubjectAccessReviews struct{ Client client.Client }

func (s SubjectAccessReviews) Allowed(ctx context.Context, u User, namespace, resource, name string) (bool, string, error) {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Group: Group,
			Version: Version, Resource: resource, Subresource: Subresource, Name: name},
		User: u.Name, Groups: u.Groups}}
	if len(u.Extra) > 0 {
		review.Spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			review.Spec.Extra[k] = v
		}
	}
	if err := s.Client.Create(ctx, review); err != nil {
		return false, "", err
	}
	return review.Status.Allowed && !review.Status.Denied, review.Status.Reason, nil
}

// Server is the HTTPS server of the API: every replica serves it (a read needs no lease).
type Server struct {
	Addr              string
	CertFile, KeyFile string
	Handler           *Handler
}

// NeedLeaderElection: no, as the webhooks.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return fmt.Errorf("the visibility server's certificate: %w", err)
	}
	listener, err := tls.Listen("tcp", s.Addr, &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: s.Handler.FrontProxy.CAs, MinVersion: tls.VersionTLS12})
	if err != nil {
		return fmt.Errorf("--visibility-bind-address %s: %w", s.Addr, err)
	}
	server := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(stop)
	}()
	ctrl.Log.WithName("visibility").Info("serving "+Group+"/"+Version, "address", listener.Addr().String())
	if err := server.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
