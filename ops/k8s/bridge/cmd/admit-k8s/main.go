// admit-k8s, the bridge between a Kubernetes cluster and the admission ledger (docs/k8s.md).
// What it does so far: forwards Kueue definitions (ResourceFlavor, Cohort, ClusterQueue,
// LocalQueue, AdmissionCheck, WorkloadPriorityClass) and the ledger's BudgetPolicies to admitd as
// they change, and writes the ledger's ClusterQueue and LocalQueue status back; suspends Jobs
// that carry kueue.x-k8s.io/queue-name at creation (a mutating webhook), submits them, mirrors
// the ledger's decisions into their Workload objects and releases them when the ledger admits
// them; forwards the admission check states that a check controller writes into a Workload's
// status when its field manager is the AdmissionCheck's controllerName, and reverts any other;
// converts our kueue.x-k8s.io CRDs between v1beta1 and v1beta2 (their conversion webhook);
// reports the Nodes' capacity under each ResourceFlavor, their failures and recoveries, and
// a released Job's pods ready; serves Kueue's visibility API (visibility.go).
// `admit-k8s migrate-storage` moves their stored objects to the storage version (migrate.go).
// It refuses to start while Kueue's own controller manager holds its leader lease: one
// admission authority per cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"admission-ledger/bridge/internal/checks"
	"admission-ledger/bridge/internal/conversion"
	"admission-ledger/bridge/internal/definitions"
	"admission-ledger/bridge/internal/jobs"
	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/nodes"
)

// KueueLeaseName is the leader-election lease of Kueue's controller manager (its default,
// DefaultLeaderElectionID in Kueue's config API).
const KueueLeaseName = "c1f6bfd2.kueue.x-k8s.io"

// StartupCheckTimeout bounds the checks made before the manager starts.
const StartupCheckTimeout = 30 * time.Second

// The API client's rate limits (--kube-api-qps, --kube-api-burst): Kueue's defaults
// (clientConnection qps 50, burst 100), not client-go's 5 and 10 or controller-runtime's 20 and
// 30, which throttle a burst of Jobs to a few a second (each takes several writes).
var (
	kubeAPIQPS   float64
	kubeAPIBurst int
	// pprofAddr: where Go's profiler is served (Kueue's pprofBindAddress; "": not at all).
	pprofAddr string
)

func main() {
	if status, ok := runSubcommand(); ok {
		os.Exit(status)
	}
	var (
		admitd, cert, key, ca   string
		leaderElect             bool
		leaderElectionNamespace string
		healthAddr, metricsAddr string
		kueueLeaseStaleAfter    time.Duration
		webhookAddr             string
		webhookCert, webhookKey string
	)
	flag.StringVar(&admitd, "admitd", "", "admitd's address: unix:PATH or tls:HOST:PORT (required)")
	flag.StringVar(&cert, "admitd-cert", "", "our client certificate for a tls: address; its common name is our principal")
	flag.StringVar(&key, "admitd-key", "", "the key of --admitd-cert")
	flag.StringVar(&ca, "admitd-ca", "", "the CA that signed admitd's certificate")
	flag.BoolVar(&leaderElect, "leader-elect", true, "run only while holding the lease admit-k8s.admission-ledger.io (one active bridge per cluster)")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "the lease's namespace (default: the pod's own; required outside a cluster)")
	flag.StringVar(&healthAddr, "health-probe-bind-address", "127.0.0.1:0", "where /healthz and /readyz are served (0: not at all)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "where controller-runtime's metrics are served (0: not at all)")
	flag.DurationVar(&kueueLeaseStaleAfter, "kueue-lease-stale-after", 2*time.Minute, "a Kueue lease not renewed for this long is taken for a Kueue that is gone")
	flag.StringVar(&webhookAddr, "webhook-bind-address", "", "HOST:PORT of the HTTPS server of the Job webhook and the CRDs' conversion webhook (empty: neither)")
	flag.StringVar(&webhookCert, "webhook-cert", "", "the webhook's serving certificate (PEM)")
	flag.StringVar(&webhookKey, "webhook-key", "", "the key of --webhook-cert")
	flag.Float64Var(&kubeAPIQPS, "kube-api-qps", 50, "requests a second to the API server, sustained (Kueue's default)")
	flag.IntVar(&kubeAPIBurst, "kube-api-burst", 100, "requests to the API server in a burst (Kueue's default)")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "where Go's profiler (/debug/pprof/) is served, HOST:PORT (empty: not at all)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: admit-k8s --admitd ADDRESS [flags]
       admit-k8s migrate-storage [--kubeconfig FILE] [-o text|json]   (see its --help)

The admission ledger's bridge to Kubernetes: forwards Kueue definitions and BudgetPolicies to
admitd as they change, and holds back Jobs with a kueue.x-k8s.io/queue-name label until the
ledger admits them; forwards check states written into Workloads by the field manager that is the
AdmissionCheck's controllerName, and reverts others; reports the Nodes' allocatable under the
ResourceFlavors whose nodeLabels they carry, and their failures and recoveries; serves the
conversion webhook of our kueue.x-k8s.io CRDs (v1beta1 <-> v1beta2) beside the Job webhook,
and with --visibility-bind-address Kueue's visibility API of pending workloads
(visibility.kueue.x-k8s.io/v1beta2, behind an APIService) (docs/k8s.md). The cluster is the one of --kubeconfig, $KUBECONFIG or the pod's service
account.

The ledger's decisions reach it through a watch on the ledger (admitd's watch); Jobs and
the queues' status are also looked at again every 45 s (a safety resync).

Test only: %s=STEP:NAMESPACE/WORKLOAD makes it stop for good at STEP of that
workload's flow, so that a test can SIGKILL it exactly there (STEP: evicted-before-suspend,
before-terminated, before-pods-released, before-unsuspend). Never set it otherwise.

Flags:
`, jobs.TestPauseEnv)
		flag.PrintDefaults()
	}
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	webhookOpts, err := webhookOptions(webhookAddr, webhookCert, webhookKey)
	if err == nil {
		err = run(admitd, cert, key, ca, leaderElect, leaderElectionNamespace, healthAddr, metricsAddr,
			kueueLeaseStaleAfter, webhookOpts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "admit-k8s: %v\n", err)
		os.Exit(1)
	}
}

func run(admitd, cert, key, ca string, leaderElect bool, leaderElectionNamespace, healthAddr,
	metricsAddr string, kueueLeaseStaleAfter time.Duration, webhookOpts *webhook.Options) error {
	if admitd == "" {
		return errors.New("--admitd is required (unix:PATH or tls:HOST:PORT); see --help")
	}
	ledgerClient, err := ledger.New(ledger.Options{Address: admitd, CertFile: cert, KeyFile: key, CAFile: ca})
	if err != nil {
		return err
	}
	defer ledgerClient.Close()

	config, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no cluster to talk to: %w", err)
	}
	// The API server names the field manager of our writes after the user agent; the check
	// forwarder tells the bridge's own writes from a check controller's by it.
	config.UserAgent = checks.BridgeFieldManager
	config.QPS, config.Burst = float32(kubeAPIQPS), kubeAPIBurst
	jobs.SetWorkloadWriteRate(kubeAPIQPS, kubeAPIBurst)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := jobsetapi.AddToScheme(scheme); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartupCheckTimeout)
	defer cancel()
	direct, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	if err := refuseIfKueueRuns(ctx, direct, kueueLeaseStaleAfter); err != nil {
		return err
	}
	principal, roles, err := ledgerClient.WhoAmI(ctx)
	if err != nil {
		return err
	}
	ctrl.Log.Info("connected to admitd", "address", admitd, "principal", principal, "roles", roles)

	options := managerOptions(scheme, leaderElect, leaderElectionNamespace, healthAddr, metricsAddr, webhookOpts)
	mgr, err := ctrl.NewManager(config, options)
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	statusWriter, err := definitions.AddStatusWriter(mgr, ledgerClient)
	if err != nil {
		return err
	}
	if err := definitions.SetupWithManager(mgr, ledgerClient, statusWriter); err != nil {
		return err
	}
	statusWriter.Submitted = jobs.SubmittedButUnshown
	jobs.OnSubmittedButUnshown = statusWriter.SubmittedNow
	jobEvents, jobLedger, err := setupJobs(mgr, ledgerClient, statusWriter.Notify)
	if err != nil {
		return err
	}
	// The ledger's decisions trigger the Jobs' reconciles and the queues' status at once (on
	// the leader, as they are).
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return watchLedger(ctx, ledgerClient, statusWriter, jobEvents, jobLedger)
	})); err != nil {
		return err
	}
	if err := checks.SetupWithManager(mgr, ledgerClient); err != nil {
		return fmt.Errorf("setting up the check forwarder: %w", err)
	}
	if err := nodes.SetupWithManager(mgr, ledgerClient); err != nil {
		return fmt.Errorf("setting up the node inventory: %w", err)
	}
	if err := addVisibility(ctx, mgr, direct, ledgerClient); err != nil {
		return fmt.Errorf("setting up the visibility API: %w", err)
	}
	if webhookOpts != nil {
		// The webhook answers whether or not this replica leads: admission must not wait for
		// an election.
		mgr.GetWebhookServer().Register(jobs.WebhookPath, jobs.NewWebhook(scheme))
		mgr.GetWebhookServer().Register(jobs.JobSetWebhookPath, jobs.NewWebhook(scheme))
		// The CRDs' conversion between v1beta1 and v1beta2, on the same server and certificate.
		mgr.GetWebhookServer().Register(conversion.WebhookPath, conversion.Webhook{})
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// managerOptions are the controller manager's options: leader election, probes and metrics,
// the webhook server (nil options: none), and every pod cached slim.
func managerOptions(scheme *runtime.Scheme, leaderElect bool, leaderElectionNamespace, healthAddr,
	metricsAddr string, webhookOpts *webhook.Options) ctrl.Options {
	var webhookServer webhook.Server
	if webhookOpts != nil {
		webhookServer = webhook.NewServer(*webhookOpts)
	}
	return ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "admit-k8s.admission-ledger.io",
		LeaderElectionNamespace: leaderElectionNamespace,
		HealthProbeBindAddress:  healthAddr,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		PprofBindAddress:        pprofAddr,
		WebhookServer:           webhookServer,
		// Every pod is cached (the node inventory's non-TAS usage, the topology ungater), slim;
		// Workloads without their managed fields unless they have admission checks.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:              {Transform: nodes.SlimPod},
			jobs.WorkloadCacheObject(): {Transform: jobs.SlimWorkload}}},
		// Kueue's kinds are read as unstructured objects: from the informers' cache too, as the
		// typed ones (controller-runtime reads them from the API server otherwise: a GET for each
		// Workload, LocalQueue and ClusterQueue read, 9,828 GETs of Workloads in a /10 run of
		// Kueue's scalability benchmark). Reads that must be current use the API reader.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	}
}

// setupJobs sets up the job framework's controllers (one per kind the cluster serves) and the
// owned Workload objects' one, sharing one cache of workload states and one source of the
// ledger's events. Kueue's Workloads the ledger does not know (a cluster where Kueue ran) are
// imported before the controllers act (docs/k8s.md, "Adopting a Kueue cluster"): they wait for
// the leader's adoption.
func setupJobs(mgr manager.Manager, ledgerClient *ledger.Client, onUnsubmitted func()) (
	*jobs.LedgerEvents, *jobs.CachedLedger, error) {
	adoption := jobs.NewAdoptionGate()
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return jobs.RunAdoption(ctx, mgr.GetAPIReader(), ledgerClient, adoption)
	})); err != nil {
		return nil, nil, err
	}
	jobEvents := jobs.NewLedgerEvents(mgr.GetClient())
	jobEvents.Workloads = func(ctx context.Context) ([]types.NamespacedName, error) {
		return ledger.WorkloadNames(ctx, ledgerClient)
	}
	jobLedger := jobs.NewCachedLedger(ledgerClient)
	kinds, err := jobs.SetupWithManager(mgr, jobLedger, jobEvents, adoption)
	if err != nil {
		return nil, nil, fmt.Errorf("setting up the job controllers: %w", err)
	}
	for _, kind := range kinds {
		ctrl.Log.Info("governing", "kind", kind.GVK().String())
	}
	err = jobs.SetupOwnedWorkloads(mgr, jobLedger, jobEvents, onUnsubmitted, adoption)
	if err != nil {
		return nil, nil, fmt.Errorf("setting up the owned Workload objects' controller: %w", err)
	}
	return jobEvents, jobLedger, nil
}

// watchLedger watches the ledger from its head on, for as long as ctx lasts: each decision about
// a Job's workload triggers a reconcile of that Job, each change of a queue's counts a copy of
// the queues' status, and every event drops what the cache holds of the workload it is about.
// When a watch starts, every Job is reconciled once (what happened before it is read then).
// Fails only when admitd refuses the watch for good.
func watchLedger(ctx context.Context, l *ledger.Client, status *definitions.StatusWriter,
	events *jobs.LedgerEvents, cache *jobs.CachedLedger) error {
	statusKinds := map[string]bool{}
	for _, k := range definitions.StatusKinds {
		statusKinds[k] = true
	}
	logger := ctrl.Log.WithName("ledger-watch")
	// Every kind: any event about a workload may change its state the cache holds.
	err := l.Watch(ctx, ledger.WatchFilter{},
		func(from uint64) {
			logger.Info("watching the ledger", "from", from)
			cache.SetLive(true)
			status.Notify()
			events.ResyncAll(ctx)
		},
		func() { cache.SetLive(false) },
		func(batch []ledger.WatchedEvent) {
			cache.Changed(batch)
			for _, e := range batch {
				if statusKinds[e.Kind] {
					status.Notify()
					break
				}
			}
			events.Handle(ctx, batch)
		})
	reads, cached := cache.Reads()
	logger.Info("stopped watching the ledger", "workloadReads", reads, "answeredFromCache", cached)
	if err != nil {
		return fmt.Errorf("watching the ledger: %w (the bridge's principal needs a role that may watch: operator or runtime)", err)
	}
	return nil
}

// webhookOptions: nil when no webhook is served.
func webhookOptions(addr, cert, key string) (*webhook.Options, error) {
	if addr == "" {
		return nil, nil
	}
	if cert == "" || key == "" {
		return nil, errors.New("--webhook-bind-address needs --webhook-cert and --webhook-key")
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: the port is not a number", addr)
	}
	if filepath.Dir(cert) != filepath.Dir(key) {
		return nil, errors.New("--webhook-cert and --webhook-key must be in one folder (controller-runtime watches it)")
	}
	return &webhook.Options{Host: host, Port: port, CertDir: filepath.Dir(cert),
		CertName: filepath.Base(cert), KeyName: filepath.Base(key)}, nil
}

// refuseIfKueueRuns fails when a Kueue controller manager holds its leader lease in any
// namespace, renewed within staleAfter: two admission authorities would fight over every Job.
func refuseIfKueueRuns(ctx context.Context, c client.Client, staleAfter time.Duration) error {
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases); err != nil {
		return fmt.Errorf("listing leases to look for Kueue's controller manager: %w", err)
	}
	for _, lease := range leases.Items {
		if lease.Name != KueueLeaseName || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			continue
		}
		if lease.Spec.RenewTime != nil && time.Since(lease.Spec.RenewTime.Time) > staleAfter {
			continue
		}
		return fmt.Errorf("Kueue's controller manager runs in this cluster (lease %s/%s held by %q): "+
			"one admission authority per cluster; remove Kueue's controller first", lease.Namespace,
			lease.Name, *lease.Spec.HolderIdentity)
	}
	return nil
}
