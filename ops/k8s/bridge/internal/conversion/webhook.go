package conversion

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// WebhookPath is where the API server sends ConversionReviews (the CRDs' spec.conversion, which
// ops/k8s/cluster.sh points at the bridge's webhook server).
const WebhookPath = "/convert"

// maxReviewBytes bounds a request body: the API server converts one object, or one list page.
const maxReviewBytes = 64 << 20

// Webhook answers apiextensions.k8s.io/v1 ConversionReviews with Convert.
type Webhook struct{}

// ServeHTTP answers one review. A review it cannot read is a 400; an object it cannot convert
// fails the whole review (the API server then fails the request that needed it).
func (Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not a ConversionReview with a request", http.StatusBadRequest)
		return
	}
	review.Response = Review(review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// Review converts every object of req to its desiredAPIVersion.
func Review(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	converted, err := convertAll(req)
	if err != nil {
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
		return resp
	}
	resp.ConvertedObjects = converted
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

func convertAll(req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
	to, ok := strings.CutPrefix(req.DesiredAPIVersion, Group+"/")
	if !ok {
		return nil, fmt.Errorf("desiredAPIVersion %q is not in group %s", req.DesiredAPIVersion, Group)
	}
	out := make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		var obj map[string]any
		// utiljson keeps integers as int64 (encoding/json would make them float64).
		if err := utiljson.Unmarshal(raw.Raw, &obj); err != nil {
			return nil, fmt.Errorf("object %d is not a JSON object: %w", i, err)
		}
		converted, err := Convert(obj, to)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		text, err := json.Marshal(converted)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		out = append(out, runtime.RawExtension{Raw: text})
	}
	return out, nil
}
