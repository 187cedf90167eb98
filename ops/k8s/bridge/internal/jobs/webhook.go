// Package jobs makes the ledger the admission authority of the objects of its Kinds (batch/v1
// Jobs, JobSets) that carry the label kueue.x-k8s.io/queue-name, as Kueue's job integrations
// do (docs/k8s.md, "Jobs"): one job framework (GenericJob) for every kind, a mutating webhook
// that suspends them at creation, and a reconciler that gives each a Workload object, submits
// it to the ledger, mirrors the ledger's state into the Workload's status, and releases the
// object (write-ahead) once the ledger admits it.
package jobs

import (
	"context"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// QueueNameLabel marks an object as managed: its value names the LocalQueue.
const QueueNameLabel = "kueue.x-k8s.io/queue-name"

// WebhookPath is where the API server sends Job creations, JobSetWebhookPath JobSet creations
// (the MutatingWebhookConfiguration that ops/k8s/cluster.sh installs names them).
const (
	WebhookPath       = "/mutate-batch-v1-job"
	JobSetWebhookPath = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
)

// Suspender is the mutating webhook of every kind: an object created with the queue label is
// created suspended (spec.suspend), so its controller creates no pod before the ledger admits
// it. Every other request is allowed unchanged: an object without the label, an update, an
// object already suspended.
type Suspender struct {
	Decoder admission.Decoder
}

// NewWebhook returns the webhook, ready for a controller-runtime webhook server.
func NewWebhook(scheme *runtime.Scheme) *webhook.Admission {
	return &webhook.Admission{Handler: &Suspender{Decoder: admission.NewDecoder(scheme)}}
}

// Handle answers one admission review.
func (s *Suspender) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("only creations are mutated")
	}
	obj := &unstructured.Unstructured{}
	if err := s.Decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if obj.GetLabels()[QueueNameLabel] == "" {
		return admission.Allowed("no " + QueueNameLabel + " label: not managed")
	}
	if suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); suspended {
		return admission.Allowed("already suspended")
	}
	// One operation on the field, not a diff of a re-encoded Job: fields this client's types do
	// not know stay as they were sent. "add" replaces a value that is present.
	return admission.Patched("suspended until the admission ledger admits it",
		jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/suspend", Value: true})
}
