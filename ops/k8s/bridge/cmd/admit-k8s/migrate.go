package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"admission-ledger/bridge/internal/migration"
)

// MigrateStorageCommand is the subcommand that migrates our CRDs' objects to their storage
// version (internal/migration).
const MigrateStorageCommand = "migrate-storage"

// MigrateStorageFieldManager names the migration's updates (they change no field, so it owns
// none; the check forwarder tells it from the bridge's own writes).
const MigrateStorageFieldManager = "admit-k8s-migrate-storage"

// migrateStorageMain runs `admit-k8s migrate-storage ARGS`; it returns the exit status.
func migrateStorageMain(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("admit-k8s "+MigrateStorageCommand, flag.ContinueOnError)
	flags.SetOutput(stderr)
	kubeconfig := flags.String("kubeconfig", "", "the cluster's kubeconfig (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	output := flags.String("o", "text", "the summary on stdout: text or json")
	flags.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admit-k8s %s [--kubeconfig FILE] [-o text|json]

Moves every object of our kueue.x-k8s.io CRDs to the CRD's storage version (v1beta2), as
kube-storage-version-migrator does: lists each CRD's objects at the storage version and
writes each back unchanged with an update (retried after reading it again on a conflict),
so the API server encodes it again in the storage version; then sets the CRD's
status.storedVersions to the storage version alone, after which v1beta1 can be removed
from the CRDs. Objects stored while v1beta1 was the storage version, or before the
conversion webhook existed, keep their v1beta1 encoding until then (docs/k8s.md).

Run it with the credentials of a cluster admin, like kubectl (it updates every object of
the seven kinds and patches customresourcedefinitions/status, which the bridge's
ClusterRole does not grant), while the bridge answers the CRDs' conversion webhook.
Running it again is harmless: an object already stored in the storage version is not
written again. A line per kind goes to stderr as each is done.

Flags:
`, MigrateStorageCommand)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() != 0 {
		fmt.Fprintf(stderr, "admit-k8s %s: unexpected argument %q; see --help\n", MigrateStorageCommand, flags.Arg(0))
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "admit-k8s %s: -o %q: write text or json\n", MigrateStorageCommand, *output)
		return 2
	}
	results, err := migrateStorage(*kubeconfig, stderr)
	if results == nil {
		results = []migration.Result{} // [] in JSON, also when no kind was reached
	}
	if *output == "json" {
		summary := struct {
			Kinds []migration.Result `json:"kinds"`
			Error string             `json:"error,omitempty"`
		}{Kinds: results}
		if err != nil {
			summary.Error = err.Error()
		}
		encoder := json.NewEncoder(stdout)
		encoder.SetIndent("", "  ")
		if encodeErr := encoder.Encode(summary); encodeErr != nil && err == nil {
			err = encodeErr
		}
	} else if err == nil {
		objects, rewritten := 0, 0
		for _, r := range results {
			objects += r.Objects
			rewritten += r.Rewritten
		}
		fmt.Fprintf(stdout, "migrated %d kinds: %d objects, %d of them stored again; storedVersions of each is its storage version alone\n",
			len(results), objects, rewritten)
	}
	if err != nil {
		fmt.Fprintf(stderr, "admit-k8s %s: %v\n", MigrateStorageCommand, err)
		return 1
	}
	return 0
}

func migrateStorage(kubeconfig string, progress io.Writer) ([]migration.Result, error) {
	var config *rest.Config
	var err error
	if kubeconfig != "" {
		config, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		config, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to: %w", err)
	}
	config.UserAgent = MigrateStorageFieldManager
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return migration.Migrate(context.Background(), c, migration.CRDs, func(r migration.Result) {
		fmt.Fprintf(progress, "%s: %s: %d objects written back at %s, %d stored again, %d conflicts retried; storedVersions [%s] -> [%s]\n",
			MigrateStorageCommand, r.CRD, r.Objects, r.StorageVersion, r.Rewritten, r.Conflicts,
			strings.Join(r.StoredVersionsBefore, " "), strings.Join(r.StoredVersionsAfter, " "))
	})
}

// runSubcommand runs the subcommand os.Args names, if any: ok is false when there is none.
func runSubcommand() (status int, ok bool) {
	if len(os.Args) > 1 && os.Args[1] == MigrateStorageCommand {
		return migrateStorageMain(os.Args[2:], os.Stdout, os.Stderr), true
	}
	return 0, false
}
