// admitctl commands of the admission lifecycle: check reports, pod runtime reports, clock
// ticks, revocations, nodes, maintenance windows and engine configuration. Every command is
// one input event through intake; refusals write nothing and exit 1 with the reason.

#include <array>
#include <iostream>
#include <tuple>

#include <CLI/CLI.hpp>
#include <capnp/message.h>

#include "ops/admitctl/common.h"
#include "schema/quantity.h"
#include "schema/time_format.h"
#include "schema/event_codec.h"

namespace admission::ops {

namespace {

// Records one input built by `fill` (which gets the open session, to look workloads up).
int RecordOne(const GlobalOptions& global, const std::string& label, const std::string& actor,
              const std::function<Status(Session&, schema::Event::Builder)>& fill,
              const std::string& format, std::optional<int64_t> at = std::nullopt,
              const char* action = nullptr) {
  auto session = OpenSession(global, false);
  if (!session.ok()) return Fail(session.status());
  capnp::MallocMessageBuilder message;
  Status s = fill(**session, message.initRoot<schema::Event>());
  if (!s.ok()) return Fail(s);
  auto options = IntakeFrom(global, actor);
  if (!options.ok()) return Fail(options.status());
  if (at) options->at_ns = *at;
  auto outcome =
      (*session)->api->Record({schema::EncodeEvent(message)}, *options, global.request_id);
  if (!outcome.ok()) return Fail(outcome.status());
  PrintOutcome({label}, *outcome, format, action, action != nullptr);
  return 0;
}

Result<WorkloadInfo> FindWorkload(Session& session, const std::string& ns_name) {
  auto name = SplitName(ns_name);
  if (!name.ok()) return name.status();
  return session.api->Workload(ns_name);
}

// One --label/--annotation/--node-selector/--toleration of report-check: "PODSET:REST".
struct PodSetFlag {
  std::string pod_set, rest;
};
Result<PodSetFlag> SplitPodSetFlag(const std::string& flag, const std::string& value) {
  const size_t colon = value.find(':');
  if (colon == std::string::npos || colon == 0) {
    return Status(Code::kInvalidArgument, flag + " '" + value + "': expected PODSET:" +
                                   (flag == "--toleration" ? "KEY[=VALUE][:EFFECT]" : "KEY=VALUE"));
  }
  return PodSetFlag{value.substr(0, colon), value.substr(colon + 1)};
}

// Builds a report's podSetUpdates from the flags, podSets in the order first named. The
// values are checked by intake (which names the field), not here.
Status FillPodSetUpdates(const std::vector<std::pair<std::string, std::vector<std::string>>>& flags,
                         schema::CheckStateReported::Builder report) {
  struct Update {
    std::vector<std::pair<std::string, std::string>> labels, annotations, node_selector;
    std::vector<std::array<std::string, 4>> tolerations;  // key, operator, value, effect
  };
  std::vector<std::pair<std::string, Update>> updates;
  auto update_of = [&](const std::string& pod_set) -> Update& {
    for (auto& [name, u] : updates) {
      if (name == pod_set) return u;
    }
    return updates.emplace_back(pod_set, Update{}).second;
  };
  for (const auto& [flag, values] : flags) {
    for (const std::string& value : values) {
      auto split = SplitPodSetFlag(flag, value);
      if (!split.ok()) return split.status();
      Update& u = update_of(split->pod_set);
      if (flag == "--toleration") {
        // KEY[=VALUE][:EFFECT]: with a value the operator is Equal, without it Exists.
        std::string rest = split->rest, effect;
        if (const size_t c = rest.rfind(':'); c != std::string::npos) {
          effect = rest.substr(c + 1);
          rest.resize(c);
        }
        const size_t eq = rest.find('=');
        if (eq == std::string::npos) {
          u.tolerations.push_back({rest, "Exists", "", effect});
        } else {
          u.tolerations.push_back({rest.substr(0, eq), "Equal", rest.substr(eq + 1), effect});
        }
        continue;
      }
      const size_t eq = split->rest.find('=');
      if (eq == std::string::npos) {
        return Status(Code::kInvalidArgument, flag + " '" + value + "': expected PODSET:KEY=VALUE");
      }
      auto& into = flag == "--label" ? u.labels : flag == "--annotation" ? u.annotations : u.node_selector;
      into.emplace_back(split->rest.substr(0, eq), split->rest.substr(eq + 1));
    }
  }
  auto out = report.initPodSetUpdates(static_cast<unsigned>(updates.size()));
  auto put = [](const std::vector<std::pair<std::string, std::string>>& pairs, auto init) {
    if (pairs.empty()) return;
    auto list = init(static_cast<unsigned>(pairs.size()));
    for (unsigned i = 0; i < pairs.size(); ++i) {
      list[i].setKey(pairs[i].first);
      list[i].setValue(pairs[i].second);
    }
  };
  for (unsigned i = 0; i < updates.size(); ++i) {
    const Update& u = updates[i].second;
    auto b = out[i];
    b.setPodSet(updates[i].first);
    put(u.labels, [&](unsigned n) { return b.initLabels(n); });
    put(u.annotations, [&](unsigned n) { return b.initAnnotations(n); });
    put(u.node_selector, [&](unsigned n) { return b.initNodeSelector(n); });
    if (!u.tolerations.empty()) {
      auto ts = b.initTolerations(static_cast<unsigned>(u.tolerations.size()));
      for (unsigned j = 0; j < u.tolerations.size(); ++j) {
        ts[j].setKey(u.tolerations[j][0]);
        ts[j].setOperator(u.tolerations[j][1]);
        ts[j].setValue(u.tolerations[j][2]);
        ts[j].setEffect(u.tolerations[j][3]);
      }
    }
  }
  return Status::Ok();
}

void SetRef(schema::WorkloadRef::Builder ref, const WorkloadInfo& wl) {
  ref.setNamespace(wl.ns);
  ref.setName(wl.name);
  ref.setUid(wl.uid);
}

struct ReportArgs {
  std::string workload, check, state, message, requeue_after, format = "text";
  uint64_t generation = 0;
  std::vector<std::string> labels, annotations, node_selector, tolerations;
};

// report-check's event: a CheckStateReported on the workload's reservation.
Status FillCheckReport(Session& session, const ReportArgs& report, schema::Event::Builder event) {
  auto wl = FindWorkload(session, report.workload);
  if (!wl.ok()) return wl.status();
  auto r = event.initBody().initCheckStateReported();
  SetRef(r.initWorkload(), *wl);
  r.setCheck(report.check);
  r.setGeneration(report.generation);
  r.setState(report.state == "Ready"     ? schema::CheckState::READY
             : report.state == "Retry"   ? schema::CheckState::RETRY
             : report.state == "Rejected" ? schema::CheckState::REJECTED
                                          : schema::CheckState::PENDING);
  r.setMessage(report.message);
  Status updates = FillPodSetUpdates({{"--label", report.labels},
                                      {"--annotation", report.annotations},
                                      {"--node-selector", report.node_selector},
                                      {"--toleration", report.tolerations}},
                                     r);
  if (!updates.ok()) return updates;
  if (!report.requeue_after.empty()) {
    auto d = schema::ParseDurationNs(report.requeue_after);
    if (!d.ok()) return d.status();
    r.setRequeueAfterNs(*d);
  }
  return Status::Ok();
}

void AddReportCheckCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto report = std::make_shared<ReportArgs>();
  auto* rc = app.add_subcommand(
      "report-check",
      "report the state of an admission check for a workload's reservation (as the check's "
      "owner, --as). STATE: Pending, Ready, Retry, Rejected. A report for an old generation is "
      "refused as stale; an identical repeat is a no-op");
  rc->add_option("workload", report->workload, "NAMESPACE/NAME")->required();
  rc->add_option("check", report->check, "AdmissionCheck name")->required();
  rc->add_option("state", report->state, "Pending, Ready, Retry or Rejected")
      ->required()
      ->check(CLI::IsMember({"Pending", "Ready", "Retry", "Rejected"}));
  rc->add_option("--generation", report->generation,
                 "the reservation generation reported on (status.admissionGeneration)")
      ->required();
  rc->add_option("--message", report->message, "what the check found");
  rc->add_option("--requeue-after", report->requeue_after, "Retry only: wait this long (e.g. 5m)");
  rc->add_option("--label", report->labels,
                 "a podSetUpdate: add label KEY=VALUE to PODSET's pods (PODSET:KEY=VALUE; "
                 "repeatable)")
      ->allow_extra_args(false);
  rc->add_option("--annotation", report->annotations,
                 "a podSetUpdate: add annotation KEY=VALUE (PODSET:KEY=VALUE; repeatable)")
      ->allow_extra_args(false);
  rc->add_option("--node-selector", report->node_selector,
                 "a podSetUpdate: add nodeSelector KEY=VALUE (PODSET:KEY=VALUE; repeatable)")
      ->allow_extra_args(false);
  rc->add_option("--toleration", report->tolerations,
                 "a podSetUpdate: add a toleration (PODSET:KEY=VALUE[:EFFECT] for Equal, "
                 "PODSET:KEY[:EFFECT] for Exists; repeatable)")
      ->allow_extra_args(false);
  rc->add_option("-o,--output", report->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  rc->callback([&global, report, exit_code] {
    *exit_code = RecordOne(
        global, "check " + report->check + " " + report->state + " for " + report->workload,
        "unknown",
        [&](Session& session, schema::Event::Builder event) -> Status {
          return FillCheckReport(session, *report, event);
        },
        report->format);
  });
}

void AddTickCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto tick_to = std::make_shared<std::string>();
  auto* tick = app.add_subcommand(
      "tick", "advance logical time: timers (check TTLs, backoffs, podsReady, drain deadlines, "
              "max wait, max execution, maintenance windows) due by then fire");
  tick->add_option("--to", *tick_to, "the time to advance to (RFC 3339); default --at or now");
  tick->callback([&global, tick_to, exit_code] {
    std::optional<int64_t> at;
    if (!tick_to->empty()) {
      auto t = ParseRfc3339(*tick_to);
      if (!t.ok()) {
        *exit_code = Fail(t.status());
        return;
      }
      at = *t;
    }
    *exit_code = RecordOne(
        global, "clock advanced", "clock",
        [&](Session& session, schema::Event::Builder event) -> Status {
          (void)session;
          int64_t to = at ? *at : 0;
          if (!at) {
            auto opts = IntakeFrom(global, "clock");
            if (!opts.ok()) return opts.status();
            to = opts->at_ns ? *opts->at_ns : SystemClock().NowNs();
            at = to;
          }
          event.initBody().initClockAdvanced().setToNs(to);
          return Status::Ok();
        },
        "text", at);
  });
}

void AddPodsCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  struct PodsArgs {
    std::string report, workload, token, message, format = "text";
  };
  auto pods = std::make_shared<PodsArgs>();
  auto* pods_cmd = app.add_subcommand(
      "pods", "pod runtime reports: released (before creating any pod), ready, terminated, "
              "finished, failedToStart (the admitted pods cannot be started: the workload "
              "finishes, its quota is released); each must carry the admission's fencing token");
  pods_cmd->add_option("report", pods->report, "released, ready, terminated, finished or failedToStart")
      ->required()
      ->check(CLI::IsMember({"released", "ready", "terminated", "finished", "failedToStart"}));
  pods_cmd->add_option("workload", pods->workload, "NAMESPACE/NAME")->required();
  pods_cmd->add_option("--token", pods->token, "fencing token (status.fencingToken)")->required();
  pods_cmd->add_option("--message", pods->message,
                       "why (failedToStart: the runtime's error; becomes the Finished message)");
  pods_cmd->add_option("-o,--output", pods->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  pods_cmd->callback([&global, pods, exit_code] {
    *exit_code = RecordOne(
        global, "pods " + pods->report + " for " + pods->workload, "pod-runtime",
        [&](Session& session, schema::Event::Builder event) -> Status {
          auto wl = FindWorkload(session, pods->workload);
          if (!wl.ok()) return wl.status();
          auto r = event.initBody().initPodsReported();
          SetRef(r.initWorkload(), *wl);
          r.setFencingToken(pods->token);
          r.setReport(pods->report == "released"     ? schema::PodsReport::RELEASED
                      : pods->report == "ready"      ? schema::PodsReport::READY
                      : pods->report == "terminated" ? schema::PodsReport::TERMINATED
                      : pods->report == "finished"   ? schema::PodsReport::FINISHED
                                                     : schema::PodsReport::FAILED_TO_START);
          // Unset when empty: reports without a message keep their canonical bytes.
          if (!pods->message.empty()) r.setMessage(pods->message);
          return Status::Ok();
        },
        pods->format);
  });
}

struct RevokeArgs {
  std::string workload, check, flavor, reason, drain_deadline, format = "text";
  bool drain = false;
};

// revoke's event: a RevocationRequested on one target; a drain deadline counts from --at, or
// from now but never before the ledger's head.
Status FillRevocation(Session& session, const GlobalOptions& global, const RevokeArgs& rv,
                      schema::Event::Builder event) {
  auto r = event.initBody().initRevocationRequested();
  if (!rv.workload.empty()) {
    auto wl = FindWorkload(session, rv.workload);
    if (!wl.ok()) return wl.status();
    SetRef(r.getTarget().initWorkload(), *wl);
  } else if (!rv.check.empty()) {
    r.getTarget().setCheck(rv.check);
  } else {
    r.getTarget().setFlavor(rv.flavor);
  }
  r.setReason(rv.reason);
  r.setPodSetAction(rv.drain ? schema::PodSetAction::DRAIN : schema::PodSetAction::TERMINATE);
  if (!rv.drain_deadline.empty()) {
    auto d = schema::ParseDurationNs(rv.drain_deadline);
    if (!d.ok()) return d.status();
    auto now = IntakeFrom(global, "");
    if (!now.ok()) return now.status();
    auto head = session.api->GetHead();
    if (!head.ok()) return head.status();
    const int64_t base = now->at_ns ? *now->at_ns
                                    : std::max(SystemClock().NowNs(), head->recorded_at_ns);
    r.setDrainDeadlineNs(base + *d);
  }
  return Status::Ok();
}

void AddRevokeCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto rv = std::make_shared<RevokeArgs>();
  auto* revoke = app.add_subcommand(
      "revoke", "revoke admissions (one workload, every workload using a check, or a flavor): "
                "their pods are told to stop, their tokens become invalid, and their quota is "
                "held until the runtime confirms the pods gone or the drain deadline passes");
  revoke->add_option("workload", rv->workload, "NAMESPACE/NAME");
  revoke->add_option("--check", rv->check, "revoke every admission that required this check");
  revoke->add_option("--flavor", rv->flavor, "revoke every admission using this flavor");
  revoke->add_option("--reason", rv->reason, "why (recorded)")->required();
  revoke->add_flag("--drain", rv->drain, "drain the pods (default: terminate)");
  revoke->add_option("--drain-deadline", rv->drain_deadline,
                     "release the quota at the latest after this long (e.g. 30m)");
  revoke->add_option("-o,--output", rv->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  revoke->callback([&global, rv, exit_code] {
    const int targets = !rv->workload.empty() + !rv->check.empty() + !rv->flavor.empty();
    if (targets != 1) {
      *exit_code = Fail(Status(Code::kInvalidArgument,
                               "name exactly one target: NAMESPACE/NAME, --check C or --flavor F"));
      return;
    }
    *exit_code = RecordOne(
        global, "revocation", "unknown",
        [&](Session& session, schema::Event::Builder event) -> Status {
          return FillRevocation(session, global, *rv, event);
        },
        rv->format);
  });
}

struct NodeArgs {
  std::string action, node, flavor, capacity, format = "text";
  bool inventory_complete = false;
  std::vector<std::string> workloads;  // fail: NAMESPACE/NAME of the workloads with pods on it
  std::vector<std::string> labels;     // capacity: KEY=VALUE, the Node's labels (engine v26)
};

// --labels: the Node's labels (topology levels for TAS, docs/tas.md), replacing those reported.
Status FillNodeLabels(const NodeArgs& node, schema::NodeCapacity::Builder n) {
  if (node.labels.empty()) return Status::Ok();
  if (node.action != "capacity") {
    return Status(Code::kInvalidArgument, "--labels: only a capacity report carries labels");
  }
  auto list = n.initLabels(static_cast<unsigned>(node.labels.size()));
  for (size_t i = 0; i < node.labels.size(); ++i) {
    const size_t eq = node.labels[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status(Code::kInvalidArgument, "--labels: '" + node.labels[i] + "' is not KEY=VALUE");
    }
    list[static_cast<unsigned>(i)].setKey(node.labels[i].substr(0, eq));
    list[static_cast<unsigned>(i)].setValue(node.labels[i].substr(eq + 1));
  }
  return Status::Ok();
}

// node's event: capacity, fail or recover, with --capacity's RESOURCE=QUANTITY list.
Status FillNodeEvent(Session& session, const NodeArgs& node, schema::Event::Builder event) {
  if (!node.workloads.empty() && node.action != "fail") {
    return Status(Code::kInvalidArgument,
                  "--workloads: only a failure names the workloads whose pods ran on the node");
  }
  auto body = event.initBody();
  auto n = node.action == "capacity" ? body.initNodeCapacityChanged()
           : node.action == "fail"   ? body.initNodeFailed()
                                     : body.initNodeRecovered();
  n.setNode(node.node);
  n.setFlavor(node.flavor);
  std::vector<std::pair<std::string, int64_t>> capacity;
  std::string rest = node.capacity;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return Status(Code::kInvalidArgument,
                    "--capacity: '" + item + "' is not RESOURCE=QUANTITY");
    }
    auto q = schema::ParseQuantityMilli(item.substr(eq + 1));
    if (!q.ok()) {
      return Status(Code::kInvalidArgument, "--capacity " + item + ": " + q.status().message());
    }
    capacity.emplace_back(item.substr(0, eq), *q);
  }
  if (node.action == "capacity" && (node.flavor.empty() || capacity.empty())) {
    return Status(Code::kInvalidArgument, "node capacity needs --flavor and --capacity");
  }
  auto list = n.initCapacity(static_cast<unsigned>(capacity.size()));
  for (size_t i = 0; i < capacity.size(); ++i) {
    list[static_cast<unsigned>(i)].setName(capacity[i].first);
    list[static_cast<unsigned>(i)].setMilli(capacity[i].second);
  }
  if (node.inventory_complete) n.setInventoryComplete(true);
  ADM_RETURN_IF_ERROR(FillNodeLabels(node, n));
  if (!node.workloads.empty()) {
    auto refs = n.initWorkloads(static_cast<unsigned>(node.workloads.size()));
    for (size_t i = 0; i < node.workloads.size(); ++i) {
      auto wl = FindWorkload(session, node.workloads[i]);
      if (!wl.ok()) return wl.status();
      SetRef(refs[static_cast<unsigned>(i)], *wl);
    }
  }
  return Status::Ok();
}

void AddNodeCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto node = std::make_shared<NodeArgs>();
  auto* node_cmd = app.add_subcommand(
      "node", "node capacity of a flavor: capacity (report), fail, recover. Once the inventory "
              "is complete, a flavor's healthy nodes bound its admissions; when a known node "
              "fails or shrinks, the workloads named with --workloads go first, then the "
              "lowest-priority, newest ones");
  node_cmd->add_option("action", node->action, "capacity, fail or recover")
      ->required()
      ->check(CLI::IsMember({"capacity", "fail", "recover"}));
  node_cmd->add_option("node", node->node, "node name")->required();
  node_cmd->add_option("--flavor", node->flavor, "the node's ResourceFlavor");
  node_cmd->add_option("--capacity", node->capacity,
                       "resources, e.g. nvidia.com/gpu=8,cpu=96,memory=1Ti");
  node_cmd->add_flag("--inventory-complete", node->inventory_complete,
                     "every node is reported now: from here on node capacity bounds admissions "
                     "(engine v19; until then node reports bound nothing)");
  node_cmd->add_option("--workloads", node->workloads,
                       "fail: the workloads (NAMESPACE/NAME) whose pods ran on the node; they "
                       "are evicted first")
      ->delimiter(',');
  node_cmd->add_option("--labels", node->labels,
                       "capacity: the Node's labels, KEY=VALUE,... (its topology levels for TAS)")
      ->delimiter(',');
  node_cmd->add_option("-o,--output", node->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  node_cmd->callback([&global, node, exit_code] {
    *exit_code = RecordOne(
        global, "node " + node->node + " " + node->action, "node-monitor",
        [&](Session& session, schema::Event::Builder event) -> Status {
          return FillNodeEvent(session, *node, event);
        },
        node->format);
  });
}

void AddMaintenanceCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  struct WindowArgs {
    std::string name, flavor, from, to;
  };
  auto window = std::make_shared<WindowArgs>();
  auto* mw = app.add_subcommand(
      "maintenance", "define a maintenance window on a flavor: admissions whose expected "
                     "runtime would overlap it wait until it is over");
  mw->add_option("name", window->name, "window name")->required();
  mw->add_option("--flavor", window->flavor, "ResourceFlavor")->required();
  mw->add_option("--from", window->from, "start (RFC 3339)")->required();
  mw->add_option("--to", window->to, "end (RFC 3339)")->required();
  mw->callback([&global, window, exit_code] {
    *exit_code = RecordOne(
        global, "maintenance window " + window->name, "operator",
        [&](Session& session, schema::Event::Builder event) -> Status {
          (void)session;
          auto from = ParseRfc3339(window->from);
          if (!from.ok()) return from.status();
          auto to = ParseRfc3339(window->to);
          if (!to.ok()) return to.status();
          if (*to <= *from) return Status(Code::kInvalidArgument, "--to must be after --from");
          auto w = event.initBody().initMaintenanceWindowDefined();
          w.setName(window->name);
          w.setFlavor(window->flavor);
          w.setStartNs(*from);
          w.setEndNs(*to);
          return Status::Ok();
        },
        "text");
  });
}


void AddConfigureCommand(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto cfg = std::make_shared<ConfigArgs>();
  auto* configure = app.add_subcommand(
      "configure", "set the decider's configuration (an input event, so replay sees it): "
                   "waitForPodsReady, Kueue's requeue backoff, aging, fair sharing, "
                   "retention of ended workloads");
  AddConfigOptions(configure, *cfg);
  configure->callback([&global, cfg, exit_code] {
    *exit_code = RecordOne(
        global, "engine configuration", "operator",
        [&](Session& session, schema::Event::Builder event) -> Status {
          (void)session;
          return FillEngineConfig(*cfg, event);
        },
        "text");
  });
}

}  // namespace

// configure's admission fair sharing: half-life, sampling interval and resource weights.
static Status FillAdmissionFairSharing(const ConfigArgs& cfg, schema::EngineConfigDef::Builder c) {
  if (cfg.afs_half_life.empty()) {
    if (!cfg.afs_weights.empty()) {
      return Status(Code::kInvalidArgument,
                    "--admission-fair-sharing-weight needs --admission-fair-sharing-half-life");
    }
    return Status::Ok();
  }
  auto half = schema::ParseDurationNs(cfg.afs_half_life);
  if (!half.ok()) {
    return Status(Code::kInvalidArgument,
                  "--admission-fair-sharing-half-life: " + half.status().message());
  }
  auto sampling = schema::ParseDurationNs(cfg.afs_sampling);
  if (!sampling.ok() || *sampling <= 0) {
    return Status(Code::kInvalidArgument,
                  "--admission-fair-sharing-sampling-interval: " +
                      (sampling.ok() ? std::string("must be greater than 0")
                                     : sampling.status().message()));
  }
  c.setAfsUsageHalfLifeNs(*half);
  c.setAfsUsageSamplingIntervalNs(*sampling);
  auto weights = c.initAfsResourceWeights(static_cast<unsigned>(cfg.afs_weights.size()));
  for (unsigned i = 0; i < cfg.afs_weights.size(); ++i) {
    const std::string& w = cfg.afs_weights[i];
    const size_t eq = w.find('=');
    auto milli = eq == std::string::npos
                     ? Result<int64_t>(Status(Code::kInvalidArgument, "expected RESOURCE=WEIGHT"))
                     : schema::ParseQuantityMilli(w.substr(eq + 1));
    if (!milli.ok() || *milli < 0) {
      return Status(Code::kInvalidArgument,
                    "--admission-fair-sharing-weight " + w + ": " +
                        (milli.ok() ? std::string("must not be negative")
                                    : milli.status().message()));
    }
    weights[i].setName(w.substr(0, eq));
    weights[i].setMilli(*milli);
  }
  return Status::Ok();
}

// configure's event: an EngineConfigDefined with every setting, defaults included.
Status FillEngineConfig(const ConfigArgs& cfg, schema::Event::Builder event) {
  auto c = event.initBody().initEngineConfigDefined();
  if (!cfg.pods_ready_timeout.empty()) {
    auto d = schema::ParseDurationNs(cfg.pods_ready_timeout);
    if (!d.ok()) return d.status();
    c.setWaitForPodsReadyEnabled(true);
    c.setPodsReadyTimeoutNs(*d);
  }
  c.setBackoffBaseSeconds(cfg.backoff_base);
  c.setBackoffMaxSeconds(cfg.backoff_max);
  c.setBackoffLimitCount(cfg.backoff_limit);
  if (!cfg.aging_step.empty()) {
    auto d = schema::ParseDurationNs(cfg.aging_step);
    if (!d.ok()) return d.status();
    c.setAgingStepNs(*d);
  }
  c.setAgingPriorityMax(cfg.aging_max);
  c.setFairSharingEnabled(cfg.fair_sharing);
  auto strategies = c.initFairSharingPreemptionStrategies(
      static_cast<unsigned>(cfg.fs_strategies.size()));
  for (unsigned i = 0; i < cfg.fs_strategies.size(); ++i) strategies.set(i, cfg.fs_strategies[i]);
  Status afs = FillAdmissionFairSharing(cfg, c);
  if (!afs.ok()) return afs;
  for (auto [flag, text, set] :
       {std::tuple{"--retain-finished", &cfg.retain_finished,
                   &schema::EngineConfigDef::Builder::setRetainFinishedNs},
        std::tuple{"--retain-deactivated", &cfg.retain_deactivated,
                   &schema::EngineConfigDef::Builder::setRetainDeactivatedNs}}) {
    auto d = schema::ParseRetentionNs(*text);
    if (!d.ok()) {
      return Status(Code::kInvalidArgument, std::string(flag) + ": " + d.status().message());
    }
    (c.*set)(*d);
  }
  return Status::Ok();
}

void AddConfigOptions(CLI::App* configure, ConfigArgs& cfg) {
  configure->add_option("--pods-ready-timeout", cfg.pods_ready_timeout,
                        "enable waitForPodsReady with this timeout (e.g. 5m)");
  configure->add_option("--backoff-base-seconds", cfg.backoff_base, "Kueue backoffBaseSeconds");
  configure->add_option("--backoff-max-seconds", cfg.backoff_max, "Kueue backoffMaxSeconds");
  configure->add_option("--backoff-limit-count", cfg.backoff_limit,
                        "Kueue backoffLimitCount (0: none)");
  configure->add_option("--aging-step", cfg.aging_step,
                        "pending workloads gain one priority point per this long (e.g. 10m)");
  configure->add_option("--aging-max", cfg.aging_max, "at most this many points of aging");
  configure->add_flag("--fair-sharing", cfg.fair_sharing,
                      "order entries by weighted dominant resource share");
  configure
      ->add_option("--fair-sharing-preemption-strategy", cfg.fs_strategies,
                   "Kueue's fairSharing.preemptionStrategies, in order (repeat the flag): "
                   "LessThanOrEqualToFinalShare, LessThanInitialShare (default: both, so)")
      ->check(CLI::IsMember({"LessThanOrEqualToFinalShare", "LessThanInitialShare"}));
  configure->add_option("--admission-fair-sharing-half-life", cfg.afs_half_life,
                        "enable Kueue's admissionFairSharing with this usageHalfLifeTime (e.g. "
                        "1h; 0 resets usage at every sampling): ClusterQueues whose "
                        "admissionScope.admissionMode is UsageBasedAdmissionFairSharing order "
                        "workloads by their LocalQueue's usage");
  configure->add_option("--admission-fair-sharing-sampling-interval", cfg.afs_sampling,
                        "admissionFairSharing.usageSamplingInterval")
      ->capture_default_str();
  configure->add_option("--admission-fair-sharing-weight", cfg.afs_weights,
                        "admissionFairSharing.resourceWeights entry RESOURCE=WEIGHT (repeatable; "
                        "absent resources weigh 1)");
  configure->add_option("--retain-finished", cfg.retain_finished,
                        "Kueue objectRetentionPolicies.workloads.afterFinished: how long a "
                        "finished, rejected or deleted workload stays in the live state (ledger "
                        "time; the ledger keeps it for ever), or never")
      ->capture_default_str();
  configure->add_option("--retain-deactivated", cfg.retain_deactivated,
                        "Kueue objectRetentionPolicies.workloads.afterDeactivatedByKueue, or never")
      ->capture_default_str();
}

// A ClusterQueue's or LocalQueue's current definition with another stopPolicy, recorded by the
// operator (kueuectl stop|resume clusterqueue|localqueue).
Status SetStopPolicy(Session& session, const std::string& kind, const std::string& name,
                     schema::StopPolicy policy, schema::Event::Builder event) {
  std::string key = "ClusterQueue//" + name;
  if (kind == "localqueue") {
    auto ns_name = SplitName(name);
    if (!ns_name.ok()) return ns_name.status();
    key = "LocalQueue/" + ns_name->first + "/" + ns_name->second;
  }
  auto body = session.api->Definition(key);
  if (!body.ok()) return body.status();
  auto current = schema::DecodeEvent(*body);
  if (!current.ok()) return current.status();
  auto b = event.initBody();
  if (kind == "localqueue") {
    b.setLocalQueueDefined(current->root().getBody().getLocalQueueDefined());
    b.getLocalQueueDefined().setStopPolicy(policy);
  } else {
    b.setClusterQueueDefined(current->root().getBody().getClusterQueueDefined());
    b.getClusterQueueDefined().setStopPolicy(policy);
  }
  return Status::Ok();
}

// A workload's spec.active as kueuectl stop|resume workload sets it (engine v21).
Status SetActivation(Session& session, const std::string& name, bool active,
                     const std::string& message, schema::Event::Builder event) {
  auto wl = FindWorkload(session, name);
  if (!wl.ok()) return wl.status();
  auto a = event.initBody().initWorkloadActivationSet();
  SetRef(a.initWorkload(), *wl);
  a.setActive(active);
  a.setMessage(message);
  return Status::Ok();
}

// stop and resume: kueuectl's verbs for a queue's spec.stopPolicy and a workload's spec.active.
void AddStopResumeCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  for (const bool stop : {true, false}) {
    auto kind = std::make_shared<std::string>();
    auto name = std::make_shared<std::string>();
    auto keep = std::make_shared<bool>(false);
    auto reason = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand(
        stop ? "stop" : "resume",
        stop ? "stop a ClusterQueue or LocalQueue as kueuectl does: stopPolicy HoldAndDrain (no "
               "new admissions, admitted workloads evicted), Hold with --keep-already-running; "
               "stop a workload: spec.active false (deactivated; evicted if admitted)"
             : "resume a stopped ClusterQueue or LocalQueue (stopPolicy None), or reactivate a "
               "deactivated workload (spec.active true: queued again)");
    cmd->add_option("kind", *kind, "clusterqueue (cq), localqueue (lq) or workload (wl)")
        ->required()
        ->check(CLI::IsMember({"clusterqueue", "cq", "localqueue", "lq", "workload", "wl"}));
    cmd->add_option("name", *name, "NAME (a LocalQueue or workload: NAMESPACE/NAME)")->required();
    if (stop) {
      cmd->add_flag("--keep-already-running", *keep,
                    "admit nothing new but leave admitted workloads running (stopPolicy Hold)");
    }
    cmd->add_option("--reason", *reason, "a workload's: why (recorded in its condition)");
    cmd->callback([&global, kind, name, keep, stop, reason, exit_code] {
      if (*kind == "workload" || *kind == "wl") {
        if (*keep) {
          *exit_code = Fail(Status(Code::kInvalidArgument,
                                   "--keep-already-running is a queue's; a stopped workload is "
                                   "evicted if admitted"));
          return;
        }
        const std::string shown = "workload.kueue.x-k8s.io/" + name->substr(name->find('/') + 1);
        *exit_code = RecordOne(
            global, shown, "operator",
            [&](Session& session, schema::Event::Builder event) {
              return SetActivation(session, *name, !stop, *reason, event);
            },
            "text", std::nullopt, stop ? "stopped" : "resumed");
        return;
      }
      if (!reason->empty()) {
        *exit_code = Fail(Status(Code::kInvalidArgument, "--reason is a workload's"));
        return;
      }
      const std::string k = *kind == "lq" || *kind == "localqueue" ? "localqueue" : "clusterqueue";
      const schema::StopPolicy policy = !stop ? schema::StopPolicy::NONE
                                        : *keep ? schema::StopPolicy::HOLD
                                                : schema::StopPolicy::HOLD_AND_DRAIN;
      const std::string shown = k + ".kueue.x-k8s.io/" + name->substr(name->find('/') + 1);
      *exit_code = RecordOne(
          global, shown, "operator",
          [&](Session& session, schema::Event::Builder event) {
            return SetStopPolicy(session, k, *name, policy, event);
          },
          "text", std::nullopt, stop ? "stopped" : "resumed");
    });
  }
}

void AddLifecycleCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  AddStopResumeCommands(app, global, exit_code);
  AddReportCheckCommand(app, global, exit_code);
  AddTickCommand(app, global, exit_code);
  AddPodsCommand(app, global, exit_code);
  AddRevokeCommand(app, global, exit_code);
  AddNodeCommand(app, global, exit_code);
  AddMaintenanceCommand(app, global, exit_code);
  AddConfigureCommand(app, global, exit_code);
}

}  // namespace admission::ops
