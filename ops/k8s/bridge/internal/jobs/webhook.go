// Package jobs makes the ledger the admission authority of batch/v1 Jobs that carry the label
// kueue.x-k8s.io/queue-name, as Kueue's job integration does (docs/k8s.md, "Jobs"): a mutating
// webhook suspends them at creation; a reconciler gives each a Workload object, submits it to
// the ledger, mirrors the ledger's state into the Workload's status, and releases the Job
// (write-ahead) once the ledger admits it.
package jobs

import (
	"context"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// QueueNameLabel marks a Job as managed: its value names the LocalQueue.
const QueueNameLabel = "kueue.x-k8s.io/queue-name"

// WebhookPath is where the API server sends Job creations (the MutatingWebhookConfiguration
// that ops/k8s/cluster.sh installs names it).
const WebhookPath = "/mutate-batch-v1-job"

// Suspender is the mutating webhook: a Job created with the queue label is created suspended,
// so the Job controller creates no pod before the ledger admits it. Every other request is
// allowed unchanged: a Job without the label, an update, a Job already suspended.
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
	job := &batchv1.Job{}
	if err := s.Decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if job.Labels[QueueNameLabel] == "" {
		return admission.Allowed("no " + QueueNameLabel + " label: not managed")
	}
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		return admission.Allowed("already suspended")
	}
	// One operation on the field, not a diff of a re-encoded Job: fields this client's types do
	// not know stay as they were sent. "add" replaces a value that is present.
	return admission.Patched("suspended until the admission ledger admits it",
		jsonpatch.JsonPatchOperation{Operation: "add", Path: "/spec/suspend", Value: true})
}
