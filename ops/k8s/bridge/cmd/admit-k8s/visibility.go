package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/visibility"
)

// Where Kueue's visibility API is served (--visibility-*): off unless an address is given.
var visibilityAddr, visibilityCert, visibilityKey string

func init() {
	flag.StringVar(&visibilityAddr, "visibility-bind-address", "", "HOST:PORT of the HTTPS server of Kueue's visibility API "+
		"(visibility.kueue.x-k8s.io/v1beta2, an aggregated API; docs/k8s.md, \"Visibility\") (empty: not served)")
	flag.StringVar(&visibilityCert, "visibility-cert", "", "the visibility server's serving certificate (PEM), for the name its APIService's Service gives")
	flag.StringVar(&visibilityKey, "visibility-key", "", "the key of --visibility-cert")
}

// addVisibility adds the visibility server to mgr when --visibility-bind-address is set: the
// front proxy it trusts is the one the API server publishes in kube-system (read once, now).
func addVisibility(ctx context.Context, mgr manager.Manager, direct client.Client, l *ledger.Client) error {
	if visibilityAddr == "" {
		return nil
	}
	if visibilityCert == "" || visibilityKey == "" {
		return errors.New("--visibility-bind-address needs --visibility-cert and --visibility-key")
	}
	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: "kube-system", Name: visibility.AuthenticationConfigMap}
	if err := direct.Get(ctx, key, &cm); err != nil {
		return fmt.Errorf("reading ConfigMap %s (the bridge needs the role extension-apiserver-authentication-reader there): %w", key, err)
	}
	proxy, err := visibility.FrontProxyFromConfigMap(cm.Data)
	if err != nil {
		return err
	}
	return mgr.Add(&visibility.Server{Addr: visibilityAddr, CertFile: visibilityCert, KeyFile: visibilityKey,
		Handler: &visibility.Handler{Ledger: l, Authorizer: visibility.SubjectAccessReviews{Client: direct},
			FrontProxy: proxy, Workloads: mgr.GetCache()}})
}
