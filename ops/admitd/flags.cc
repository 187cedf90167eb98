#include "ops/admitd/flags.h"

namespace admission::ops::admitd {

void AddFlags(CLI::App& app, Args& args) {
  app.add_option("--ledger", args.ledger_dir,
                 "ledger directory (created if missing), or kafka://HOST:PORT/TOPIC: the Kafka "
                 "ledger, with this daemon as its one fenced writer")
      ->required();
  app.add_option("--state", args.state_dir,
                 "Kafka ledger: the folder of its local copy and snapshots (required with "
                 "kafka://; rebuilt from the topic when lost)");
  app.add_flag("--create-topic", args.create_topic,
               "Kafka ledger: create the topic when missing (one partition, "
               "cleanup.policy=delete, retention.ms=-1)");
  app.add_option("--kafka-timeout-ms", args.kafka_timeout_ms,
                 "Kafka ledger: how long to wait for the broker on start, commit and reads "
                 "(default 30000)")
      ->check(CLI::Range(100, 600'000));
  app.add_option("--transaction-timeout-ms", args.transaction_timeout_ms,
                 "Kafka ledger: the producer's transaction.timeout.ms (default 60000)")
      ->check(CLI::Range(1000, 900'000));
  app.add_option("--session-timeout-ms", args.session_timeout_ms,
                 "Kafka ledger: a writer that sends no heartbeat to the group for this long loses "
                 "the ledger to a standby (default 10000; the broker's minimum is 6000)")
      ->check(CLI::Range(1000, 300'000));
  app.add_option("--advertise", args.advertise,
                 "Kafka ledger: the address a standby names to callers it refuses writes "
                 "(default: the first --listen address, as bound)");
  app.add_option("--listen", args.listen,
                 "unix:PATH or tls:HOST:PORT (repeatable; port 0 picks one)")
      ->required();
  app.add_option("--tls-cert", args.tls.cert, "the daemon's certificate (PEM), for tls: addresses");
  app.add_option("--tls-key", args.tls.key, "the daemon's private key (PEM)");
  app.add_option("--client-ca", args.tls.ca,
                 "the CA (PEM) whose client certificates are accepted; any other is refused");
  app.add_option("--policy", args.policy,
                 "principals and roles (YAML; reloaded on SIGHUP). Without it only admin may call");
  app.add_option("--metrics-listen", args.metrics_listen,
                 "HOST:PORT (port 0 picks one): serve /metrics (Prometheus text: Kueue's metric "
                 "names, a projection of the ledger), /healthz and /readyz over HTTP");
  app.add_flag("--local-queue-metrics", args.local_queue_metrics,
               "also serve Kueue's kueue_local_queue_* metrics (labels name, namespace; many "
               "series where LocalQueues are many)");
  app.add_option("--ready-file", args.ready_file,
                 "once listening, write the bound addresses here (one per line)");
  app.add_option("--snapshot-every", args.snapshot_every,
                 "take a snapshot after an append that crosses a multiple of this many events "
                 "(default 100000; 0: never)");
  app.add_option("--min-free-bytes", args.min_free_bytes,
                 "the free-space floor of the embedded ledger's disk: writes are refused "
                 "(\"no space\", nothing written, /readyz not ready) while less is free, and "
                 "resume by themselves when space returns (default: 64 MiB, or an eighth of a "
                 "disk smaller than 512 MiB; 0: only a full disk)");
  app.add_option("--log-level", args.log_level, "trace, debug, info (default), warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

}  // namespace admission::ops::admitd
