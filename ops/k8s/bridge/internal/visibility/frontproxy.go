package visibility

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// AuthenticationConfigMap is where the API server publishes how an aggregated API server
// recognises it (namespace kube-system): the CA of its front-proxy client certificate and the
// headers that carry the user it speaks for.
const AuthenticationConfigMap = "extension-apiserver-authentication"

// User is the one a request was made by, as the API server's front proxy names it.
type User struct {
	Name   string
	Groups []string
	Extra  map[string][]string
}

// FrontProxy recognises the API server's aggregator: a client certificate signed by CAs whose
// common name is one of AllowedNames (any, when empty), and trusts the user it names in its
// headers. What k8s.io/apiserver's request-header authenticator does, for the one caller an
// aggregated API has.
type FrontProxy struct {
	CAs             *x509.CertPool
	AllowedNames    []string
	UsernameHeaders []string
	GroupHeaders    []string
	ExtraPrefixes   []string
}

// FrontProxyFromConfigMap reads the data of kube-system/extension-apiserver-authentication.
// Errors: no front proxy configured (the API server runs without --requestheader-client-ca-file
// and cannot reach an aggregated API), or a malformed field, named.
func FrontProxyFromConfigMap(data map[string]string) (FrontProxy, error) {
	var f FrontProxy
	ca := data["requestheader-client-ca-file"]
	if ca == "" {
		return f, errors.New("ConfigMap kube-system/" + AuthenticationConfigMap +
			" has no requestheader-client-ca-file: the API server runs without a front proxy " +
			"(--requestheader-client-ca-file, --proxy-client-cert-file) and cannot serve an aggregated API")
	}
	f.CAs = x509.NewCertPool()
	if !f.CAs.AppendCertsFromPEM([]byte(ca)) {
		return f, errors.New("ConfigMap kube-system/" + AuthenticationConfigMap +
			": requestheader-client-ca-file holds no PEM certificate")
	}
	for _, field := range []struct {
		key string
		to  *[]string
	}{{"requestheader-allowed-names", &f.AllowedNames},
		{"requestheader-username-headers", &f.UsernameHeaders},
		{"requestheader-group-headers", &f.GroupHeaders},
		{"requestheader-extra-headers-prefix", &f.ExtraPrefixes}} {
		text := data[field.key]
		if text == "" {
			continue
		}
		if err := json.Unmarshal([]byte(text), field.to); err != nil {
			return f, fmt.Errorf("ConfigMap kube-system/%s: %s %q is not a JSON list of strings: %w",
				AuthenticationConfigMap, field.key, text, err)
		}
	}
	if len(f.UsernameHeaders) == 0 {
		return f, errors.New("ConfigMap kube-system/" + AuthenticationConfigMap +
			": requestheader-username-headers is empty (the API server's --requestheader-username-headers)")
	}
	return f, nil
}

// Authenticate returns the user the front proxy speaks for. The TLS server verified the client
// certificate against CAs (tls.VerifyClientCertIfGiven); a request without one, or from a name
// not allowed, or naming no user, is not authenticated.
func (f FrontProxy) Authenticate(r *http.Request) (User, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return User{}, errors.New("no client certificate of the API server's front proxy")
	}
	cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
	if len(f.AllowedNames) > 0 && !slices.Contains(f.AllowedNames, cn) {
		return User{}, fmt.Errorf("client certificate %q is not one of the front proxy's names %v", cn, f.AllowedNames)
	}
	var u User
	for _, h := range f.UsernameHeaders {
		if v := r.Header.Get(h); v != "" {
			u.Name = v
			break
		}
	}
	if u.Name == "" {
		return User{}, errors.New("the front proxy named no user")
	}
	for _, h := range f.GroupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for key, values := range r.Header {
		for _, prefix := range f.ExtraPrefixes {
			if len(key) > len(prefix) && strings.EqualFold(key[:len(prefix)], prefix) {
				if u.Extra == nil {
					u.Extra = map[string][]string{}
				}
				// Keys are percent-encoded by the proxy (k8s.io/apiserver's headerrequest).
				name, err := url.PathUnescape(strings.ToLower(key[len(prefix):]))
				if err != nil {
					name = strings.ToLower(key[len(prefix):])
				}
				u.Extra[name] = append(u.Extra[name], values...)
			}
		}
	}
	return u, nil
}
