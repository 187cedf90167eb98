#include "tests/scenarios/steps.h"

#include <exception>
#include <filesystem>
#include <initializer_list>
#include <utility>

#include <capnp/message.h>

#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/views/render.h"
#include "schema/event_codec.h"
#include "schema/quantity.h"
#include "schema/time_format.h"
#include "tests/scenarios/workload_yaml.h"

namespace admission::testing {

namespace {

constexpr int64_t kStepNsDefault = 1'000'000'000;  // a step without `at:` is one second later

// The keys of a scenario file, of a step, and of each step's map.
const std::initializer_list<const char*> kFileKeys = {"description", "kueue", "steps"};
// A Kueue table case a scenario ports (`kueue:` of a scenario file).
const std::initializer_list<const char*> kPortKeys = {"test", "case", "differs", "gap"};
const std::initializer_list<const char*> kStepKeys = {
    "name", "at", "refused", "apply", "remove", "submit", "import", "workloads", "finish", "delete",
    "finish_by_uid", "report", "pods", "revoke", "activate", "tick", "node", "maintenance", "configure",
    "expect", "noop"};
const std::initializer_list<const char*> kReportKeys = {
    "workload", "check", "state", "generation", "message", "requeueAfter", "as", "podSetUpdates"};
// A report's podSetUpdates, as Kueue's AdmissionCheckState has them.
const std::initializer_list<const char*> kPodSetUpdateKeys = {
    "name", "labels", "annotations", "nodeSelector", "tolerations"};
const std::initializer_list<const char*> kTolerationKeys = {"key", "operator", "value", "effect"};
const std::initializer_list<const char*> kPodsKeys = {"workload", "report", "token", "message"};
// Kueue's spec.active of a workload (engine v21).
const std::initializer_list<const char*> kActivateKeys = {"workload", "active", "message", "as"};
const std::initializer_list<const char*> kRevokeKeys = {
    "workload", "check", "flavor", "reason", "drain", "drainDeadline", "as"};
const std::initializer_list<const char*> kNodeKeys = {
    "action", "node", "flavor", "capacity", "inventoryComplete", "workloads",
    "labels", "taints", "nonTasUsage"};
const std::initializer_list<const char*> kMaintenanceKeys = {"name", "flavor", "from", "to"};
const std::initializer_list<const char*> kConfigureKeys = {
    "podsReadyTimeout", "backoffBaseSeconds", "backoffMaxSeconds", "backoffLimitCount",
    "agingStep",        "agingMax",           "fairSharing",       "retainFinished",
    "retainDeactivated", "admissionFairSharing", "preemptionStrategies"};

// The compact form of a workload (workload_yaml.h), and of each of its podSets.
const std::initializer_list<const char*> kWorkloadKeys = {
    "name",     "queue",    "priority",     "priorityClassName", "count",
    "minCount", "requests", "nodeSelector", "tolerations",       "podSets",
    "runtime",  "maxExecution", "topology"};
const std::initializer_list<const char*> kPodSetKeys = {
    "name", "count", "minCount", "requests", "nodeSelector", "tolerations", "topology"};

Status Refuse(const std::string& where, const std::string& what) {
  return Status(Code::kInvalidArgument, where + ": " + what);
}

// Refuses a node that is not a mapping, or that has a key outside `known`.
Status CheckKeys(const YAML::Node& node, std::initializer_list<const char*> known,
                 const std::string& where, const std::string& what) {
  if (!node.IsMap()) return Refuse(where, what + " is not a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return Refuse(where, "unknown key '" + key + "' in " + what + " (known: " + list + ")");
    }
  }
  return Status::Ok();
}

std::string Text(const YAML::Node& node, const char* key, const std::string& otherwise) {
  return node[key] ? node[key].as<std::string>() : otherwise;
}

// Sets the parsed value, or returns the parser's refusal.
template <typename T>
Status Parsed(Result<T> result, const std::string& where, const char* key, T* out) {
  if (!result.ok()) return Refuse(where, std::string(key) + ": " + result.status().message());
  *out = *result;
  return Status::Ok();
}

void SetRef(schema::WorkloadRef::Builder ref, const projections::WorkloadState& wl) {
  ref.setNamespace(wl.ns);
  ref.setName(wl.name);
  ref.setUid(wl.uid);
}

}  // namespace

Result<YAML::Node> LoadScenarioSteps(const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Refuse(path, std::string("not valid YAML: ") + e.what());
  }
  ADM_RETURN_IF_ERROR(CheckKeys(doc, kFileKeys, path, "the scenario"));
  if (!doc["steps"] || !doc["steps"].IsSequence()) return Refuse(path, "no list of steps");
  ADM_RETURN_IF_ERROR(LoadKueuePorts(path).status());
  return doc["steps"];
}

Result<std::vector<KueuePort>> LoadKueuePorts(const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Refuse(path, std::string("not valid YAML: ") + e.what());
  }
  std::vector<KueuePort> ports;
  const YAML::Node list = doc.IsMap() ? doc["kueue"] : YAML::Node();
  if (!list) return ports;
  if (!list.IsSequence()) return Refuse(path, "kueue: not a list of ported cases");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = path + " kueue[" + std::to_string(i) + "]";
    ADM_RETURN_IF_ERROR(CheckKeys(list[i], kPortKeys, where, "a ported case"));
    KueuePort port;
    try {
      if (!list[i]["test"] || !list[i]["case"]) return Refuse(where, "needs test and case");
      port.test = list[i]["test"].as<std::string>();
      port.kueue_case = list[i]["case"].as<std::string>();
      if (list[i]["differs"]) port.differs = list[i]["differs"].as<std::string>();
      if (list[i]["gap"]) port.gap = list[i]["gap"].as<std::string>();
    } catch (const YAML::Exception& e) {
      return Refuse(where, std::string("not text: ") + e.what());
    }
    if (port.test.empty() || port.kueue_case.empty()) return Refuse(where, "empty test or case");
    if (!port.differs.empty() && !port.gap.empty()) {
      return Refuse(where, "differs (a deliberate difference) and gap (Kueue's behaviour not built) "
                           "exclude each other");
    }
    ports.push_back(std::move(port));
  }
  return ports;
}

std::string StepWhere(const std::string& file, const YAML::Node& step, size_t index) {
  std::string where = std::filesystem::path(file).filename().string() + " step " +
                      std::to_string(index);
  if (step.IsMap() && step["name"]) where += " (" + step["name"].as<std::string>() + ")";
  return where;
}

// One step being run: each step key is one method, run in a fixed order (the order of
// kStepKeys), each recording its inputs as one append.
class StepRunner::Step {
 public:
  Step(StepRunner& runner, const YAML::Node& step, std::string where)
      : r_(runner), step_(step), where_(std::move(where)) {}

  Result<StepOutcome> Run() {
    ADM_RETURN_IF_ERROR(CheckAllKeys());
    refused_ = Text(step_, "refused", "");
    ADM_RETURN_IF_ERROR(AdvanceClock());
    ADM_RETURN_IF_ERROR(Definitions(
        "apply", [](std::string_view text) { return ops::ParseApplyYaml(text); }));
    ADM_RETURN_IF_ERROR(Definitions("remove", ops::ParseDeleteYaml));
    for (const char* verb : {"submit", "import", "workloads"}) ADM_RETURN_IF_ERROR(Submit(verb));
    for (const char* verb : {"finish", "delete", "finish_by_uid"}) {
      ADM_RETURN_IF_ERROR(Finish(verb));
    }
    ADM_RETURN_IF_ERROR(Report());
    ADM_RETURN_IF_ERROR(Pods());
    ADM_RETURN_IF_ERROR(Revoke());
    ADM_RETURN_IF_ERROR(Activate());
    ADM_RETURN_IF_ERROR(Tick());
    ADM_RETURN_IF_ERROR(Node());
    ADM_RETURN_IF_ERROR(Maintenance());
    ADM_RETURN_IF_ERROR(Configure());
    return std::move(outcome_);
  }

 private:
  // Before anything is recorded: the step's keys, and those of each of its maps.
  Status CheckAllKeys() {
    ADM_RETURN_IF_ERROR(CheckKeys(step_, kStepKeys, where_, "the step"));
    const std::pair<const char*, std::initializer_list<const char*>> maps[] = {
        {"report", kReportKeys}, {"pods", kPodsKeys},
        {"revoke", kRevokeKeys}, {"activate", kActivateKeys}, {"node", kNodeKeys},
        {"maintenance", kMaintenanceKeys}, {"configure", kConfigureKeys}};
    for (const auto& [key, known] : maps) {
      if (step_[key]) ADM_RETURN_IF_ERROR(CheckKeys(step_[key], known, where_, key));
    }
    return CheckWorkloadKeys();
  }

  Status CheckWorkloadKeys() {
    const YAML::Node workloads = step_["workloads"];
    if (!workloads) return Status::Ok();
    if (!workloads.IsSequence()) return Refuse(where_, "workloads is not a list");
    for (size_t i = 0; i < workloads.size(); ++i) {
      const std::string what = "workloads[" + std::to_string(i) + "]";
      ADM_RETURN_IF_ERROR(CheckKeys(workloads[i], kWorkloadKeys, where_, what));
      const YAML::Node pod_sets = workloads[i]["podSets"];
      if (!pod_sets) continue;
      if (!pod_sets.IsSequence()) return Refuse(where_, what + ".podSets is not a list");
      for (size_t j = 0; j < pod_sets.size(); ++j) {
        ADM_RETURN_IF_ERROR(CheckKeys(pod_sets[j], kPodSetKeys, where_,
                                      what + ".podSets[" + std::to_string(j) + "]"));
      }
    }
    return Status::Ok();
  }

  // Records the inputs as one append. Under `refused: TEXT`, requires intake to refuse them
  // with a message containing TEXT, writing nothing. Either way the decider's quota invariants
  // (Engine::CheckInvariants) must hold afterwards.
  Status Record(const std::vector<std::string>& inputs, const std::string& actor) {
    if (inputs.empty()) return Status::Ok();
    ops::IntakeOptions options;
    options.at_ns = r_.clock_.now_ns;
    options.actor = actor;
    const uint64_t head_before = r_.log_.GetHead().sequence;
    auto outcome = r_.service_.Record(inputs, options);
    if (Status held = r_.service_.engine().CheckInvariants(); !held.ok()) {
      return Refuse(where_, "after its inputs, a quota invariant fails: " + held.message());
    }
    if (!refused_.empty()) return CheckRefusal(outcome, head_before);
    if (!outcome.ok()) return Refuse(where_, "refused: " + outcome.status().ToString());
    outcome_.last_input_unchanged = !outcome->unchanged.empty() && outcome->unchanged.back();
    for (const std::string& bytes : outcome->decisions) {
      auto d = schema::DecodeEvent(bytes);
      if (!d.ok()) return d.status();
      outcome_.decisions.push_back(schema::BodyName(d->root()) + " " +
                                   ops::DescribeDecision(d->root()));
    }
    return Status::Ok();
  }

  Status CheckRefusal(const Result<ops::RecordOutcome>& outcome, uint64_t head_before) {
    if (outcome.ok()) {
      return Refuse(where_, "expected a refusal containing '" + refused_ + "'; it was recorded");
    }
    if (outcome.status().message().find(refused_) == std::string::npos) {
      return Refuse(where_, "expected a refusal containing '" + refused_ + "', got " +
                                outcome.status().ToString());
    }
    if (r_.log_.GetHead().sequence != head_before) {
      return Refuse(where_, "a refused input wrote events");
    }
    return Status::Ok();
  }

  Status FindWorkload(const std::string& key, const projections::WorkloadState** out) {
    const auto& workloads = r_.service_.engine().workloads();
    auto it = workloads.find(key);
    if (it == workloads.end()) return Status(Code::kNotFound, where_ + ": no workload " + key);
    *out = &it->second;
    return Status::Ok();
  }

  Status AdvanceClock() {
    if (!step_["at"]) {
      r_.clock_.now_ns += kStepNsDefault;
      return Status::Ok();
    }
    return Parsed(ParseRfc3339(step_["at"].as<std::string>()), where_, "at", &r_.clock_.now_ns);
  }

  // Definitions (`apply:`) and their deletions (`remove:`, as for `admitctl delete -f`), each
  // parsed as admitctl parses them and recorded by the operator.
  Status Definitions(const char* key,
                     Result<std::vector<ops::ParsedObject>> (*parse)(std::string_view)) {
    if (!step_[key]) return Status::Ok();
    auto objects = parse(step_[key].as<std::string>());
    if (!objects.ok()) return Refuse(where_, std::string(key) + ": " + objects.status().message());
    std::vector<std::string> inputs;
    for (const auto& o : *objects) inputs.push_back(o.event);
    return Record(inputs, "operator");
  }

  // submit, import, or workloads (the compact form of submit). A workload's idempotency key is
  // its verb and name, as admitctl's.
  Status Submit(const std::string& verb) {
    if (!step_[verb]) return Status::Ok();
    const bool compact = verb == "workloads";
    const std::string text = compact ? WorkloadYaml(step_[verb]) : step_[verb].as<std::string>();
    const std::string kind = compact ? "submit" : verb;
    ops::SubmitContext ctx;
    ctx.name_seed = std::to_string(r_.log_.GetHead().sequence);
    auto objects =
        kind == "submit" ? ops::ParseSubmitYaml(text, ctx) : ops::ParseImportYaml(text, ctx);
    if (!objects.ok()) {
      // Under `refused:`, a document the parser refuses is the refusal (nothing is recorded).
      if (!refused_.empty() && objects.status().message().find(refused_) != std::string::npos) {
        return Status::Ok();
      }
      return Refuse(where_, verb + ": " + objects.status().message());
    }
    std::vector<std::string> inputs;
    for (const auto& o : *objects) {
      auto decoded = schema::DecodeEvent(o.event);
      if (!decoded.ok()) return decoded.status();
      capnp::MallocMessageBuilder message;
      message.setRoot(decoded->root());
      message.getRoot<schema::Event>().setIdempotencyKey(kind + "/" + o.ns + "/" + o.name);
      inputs.push_back(schema::EncodeEvent(message));
    }
    return Record(inputs, "submitter");
  }

  // finish, delete, or finish_by_uid (the reference carries the uid and namespace, no name).
  Status Finish(const std::string& verb) {
    if (!step_[verb]) return Status::Ok();
    std::vector<std::string> names;
    if (step_[verb].IsSequence()) {
      for (const auto& n : step_[verb]) names.push_back(n.as<std::string>());
    } else {
      names.push_back(step_[verb].as<std::string>());
    }
    std::vector<std::string> inputs;
    for (const std::string& key : names) {
      const projections::WorkloadState* wl = nullptr;
      ADM_RETURN_IF_ERROR(FindWorkload(key, &wl));
      capnp::MallocMessageBuilder message;
      auto body = message.initRoot<schema::Event>().initBody();
      auto ref = verb == "delete" ? body.initWorkloadDeleted().initWorkload()
                                  : body.initWorkloadFinished().initWorkload();
      ref.setNamespace(wl->ns);
      if (verb != "finish_by_uid") ref.setName(wl->name);
      ref.setUid(wl->uid);
      inputs.push_back(schema::EncodeEvent(message));
    }
    return Record(inputs, "runtime");
  }

  Status Report() {
    const YAML::Node r = step_["report"];
    if (!r) return Status::Ok();
    const projections::WorkloadState* wl = nullptr;
    ADM_RETURN_IF_ERROR(FindWorkload(r["workload"].as<std::string>(), &wl));
    capnp::MallocMessageBuilder m;
    auto rep = m.initRoot<schema::Event>().initBody().initCheckStateReported();
    SetRef(rep.initWorkload(), *wl);
    rep.setCheck(r["check"].as<std::string>());
    const std::string gen = Text(r, "generation", "current");
    rep.setGeneration(gen == "current" ? wl->generation : std::stoull(gen));
    const std::string state = r["state"].as<std::string>();
    rep.setState(state == "Ready"      ? schema::CheckState::READY
                 : state == "Retry"    ? schema::CheckState::RETRY
                 : state == "Rejected" ? schema::CheckState::REJECTED
                                       : schema::CheckState::PENDING);
    if (r["message"]) rep.setMessage(r["message"].as<std::string>());
    if (r["requeueAfter"]) {
      int64_t after_ns = 0;
      ADM_RETURN_IF_ERROR(Parsed(schema::ParseDurationNs(r["requeueAfter"].as<std::string>()),
                                 where_, "requeueAfter", &after_ns));
      rep.setRequeueAfterNs(after_ns);
    }
    if (r["podSetUpdates"]) ADM_RETURN_IF_ERROR(PodSetUpdates(r["podSetUpdates"], rep));
    return Record({schema::EncodeEvent(m)}, Text(r, "as", "nobody"));
  }

  // Copies the YAML as given (intake validates it: a scenario may test its refusals).
  Status PodSetUpdates(const YAML::Node& list, schema::CheckStateReported::Builder rep) {
    if (!list.IsSequence()) return Refuse(where_, "report.podSetUpdates is not a list");
    auto out = rep.initPodSetUpdates(static_cast<unsigned>(list.size()));
    auto pairs = [](const YAML::Node& map, auto init) {
      if (!map) return;
      auto l = init(static_cast<unsigned>(map.size()));
      unsigned i = 0;
      for (const auto& kv : map) {
        l[i].setKey(kv.first.as<std::string>());
        l[i].setValue(kv.second.as<std::string>());
        ++i;
      }
    };
    for (unsigned i = 0; i < list.size(); ++i) {
      const YAML::Node u = list[i];
      const std::string at = where_ + ": report.podSetUpdates[" + std::to_string(i) + "]";
      ADM_RETURN_IF_ERROR(CheckKeys(u, kPodSetUpdateKeys, at, "a podSetUpdate"));
      auto b = out[i];
      b.setPodSet(Text(u, "name", ""));
      pairs(u["labels"], [&](unsigned n) { return b.initLabels(n); });
      pairs(u["annotations"], [&](unsigned n) { return b.initAnnotations(n); });
      pairs(u["nodeSelector"], [&](unsigned n) { return b.initNodeSelector(n); });
      if (const YAML::Node ts = u["tolerations"]) {
        auto tl = b.initTolerations(static_cast<unsigned>(ts.size()));
        for (unsigned j = 0; j < ts.size(); ++j) {
          ADM_RETURN_IF_ERROR(CheckKeys(ts[j], kTolerationKeys, at, "a toleration"));
          tl[j].setKey(Text(ts[j], "key", ""));
          tl[j].setOperator(Text(ts[j], "operator", ""));
          tl[j].setValue(Text(ts[j], "value", ""));
          tl[j].setEffect(Text(ts[j], "effect", ""));
        }
      }
    }
    return Status::Ok();
  }

  Status Pods() {
    const YAML::Node p = step_["pods"];
    if (!p) return Status::Ok();
    const projections::WorkloadState* wl = nullptr;
    ADM_RETURN_IF_ERROR(FindWorkload(p["workload"].as<std::string>(), &wl));
    capnp::MallocMessageBuilder m;
    auto rep = m.initRoot<schema::Event>().initBody().initPodsReported();
    SetRef(rep.initWorkload(), *wl);
    const std::string token = Text(p, "token", "current");
    const std::string current = wl->fencing_token.empty()
                                    ? wl->uid + "/" + std::to_string(wl->generation)
                                    : wl->fencing_token;
    rep.setFencingToken(token == "current" ? current : token);
    const std::string what = p["report"].as<std::string>();
    if (what != "released" && what != "ready" && what != "terminated" && what != "finished" &&
        what != "failedToStart") {
      return Refuse(where_, "pods.report: \"" + what +
                                "\" is not released, ready, terminated, finished or failedToStart");
    }
    rep.setReport(what == "released"     ? schema::PodsReport::RELEASED
                  : what == "ready"      ? schema::PodsReport::READY
                  : what == "terminated" ? schema::PodsReport::TERMINATED
                  : what == "finished"   ? schema::PodsReport::FINISHED
                                         : schema::PodsReport::FAILED_TO_START);
    if (p["message"]) rep.setMessage(p["message"].as<std::string>());
    return Record({schema::EncodeEvent(m)}, "pod-runtime");
  }

  Status Revoke() {
    const YAML::Node r = step_["revoke"];
    if (!r) return Status::Ok();
    capnp::MallocMessageBuilder m;
    auto rev = m.initRoot<schema::Event>().initBody().initRevocationRequested();
    if (r["workload"]) {
      const projections::WorkloadState* wl = nullptr;
      ADM_RETURN_IF_ERROR(FindWorkload(r["workload"].as<std::string>(), &wl));
      SetRef(rev.getTarget().initWorkload(), *wl);
    } else if (r["check"]) {
      rev.getTarget().setCheck(r["check"].as<std::string>());
    } else {
      rev.getTarget().setFlavor(r["flavor"].as<std::string>());
    }
    rev.setReason(Text(r, "reason", "test"));
    if (r["drain"] && r["drain"].as<bool>()) rev.setPodSetAction(schema::PodSetAction::DRAIN);
    if (r["drainDeadline"]) {
      int64_t deadline_ns = 0;
      ADM_RETURN_IF_ERROR(Parsed(schema::ParseDurationNs(r["drainDeadline"].as<std::string>()),
                                 where_, "drainDeadline", &deadline_ns));
      rev.setDrainDeadlineNs(r_.clock_.now_ns + deadline_ns);
    }
    return Record({schema::EncodeEvent(m)}, Text(r, "as", "security"));
  }

  Status Activate() {
    const YAML::Node a = step_["activate"];
    if (!a) return Status::Ok();
    capnp::MallocMessageBuilder m;
    auto act = m.initRoot<schema::Event>().initBody().initWorkloadActivationSet();
    const projections::WorkloadState* wl = nullptr;
    ADM_RETURN_IF_ERROR(FindWorkload(Text(a, "workload", ""), &wl));
    SetRef(act.initWorkload(), *wl);
    act.setActive(a["active"] && a["active"].as<bool>());
    act.setMessage(Text(a, "message", ""));
    return Record({schema::EncodeEvent(m)}, Text(a, "as", "operator"));
  }

  Status Tick() {
    if (!step_["tick"]) return Status::Ok();
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initBody().initClockAdvanced().setToNs(r_.clock_.now_ns);
    return Record({schema::EncodeEvent(m)}, "clock");
  }

  Status Node() {
    const YAML::Node n = step_["node"];
    if (!n) return Status::Ok();
    capnp::MallocMessageBuilder m;
    auto body = m.initRoot<schema::Event>().initBody();
    const std::string action = n["action"].as<std::string>();
    auto node = action == "capacity" ? body.initNodeCapacityChanged()
                : action == "fail"   ? body.initNodeFailed()
                                     : body.initNodeRecovered();
    node.setNode(n["node"].as<std::string>());
    if (n["flavor"]) node.setFlavor(n["flavor"].as<std::string>());
    if (n["capacity"]) {
      auto list = node.initCapacity(static_cast<unsigned>(n["capacity"].size()));
      unsigned i = 0;
      for (const auto& c : n["capacity"]) {
        int64_t milli = 0;
        ADM_RETURN_IF_ERROR(Parsed(schema::ParseQuantityMilli(c.second.as<std::string>()),
                                   where_, "capacity", &milli));
        list[i].setName(c.first.as<std::string>());
        list[i].setMilli(milli);
        ++i;
      }
    }
    if (n["inventoryComplete"] && n["inventoryComplete"].as<bool>()) node.setInventoryComplete(true);
    ADM_RETURN_IF_ERROR(NodeTopology(n, node));
    if (n["workloads"]) {
      // The workloads whose pods ran on the node (a failure's report names them).
      auto refs = node.initWorkloads(static_cast<unsigned>(n["workloads"].size()));
      unsigned i = 0;
      for (const auto& w : n["workloads"]) {
        const projections::WorkloadState* wl = nullptr;
        ADM_RETURN_IF_ERROR(FindWorkload(w.as<std::string>(), &wl));
        SetRef(refs[i++], *wl);
      }
    }
    return Record({schema::EncodeEvent(m)}, "node-monitor");
  }

  // Engine v26: the Node's labels, taints ("key=value:Effect") and non-TAS usage.
  Status NodeTopology(const YAML::Node& n, schema::NodeCapacity::Builder node) {
    if (n["labels"]) {
      auto list = node.initLabels(static_cast<unsigned>(n["labels"].size()));
      unsigned i = 0;
      for (const auto& l : n["labels"]) {
        list[i].setKey(l.first.as<std::string>());
        list[i++].setValue(l.second.as<std::string>());
      }
    }
    if (n["taints"]) {
      auto list = node.initTaints(static_cast<unsigned>(n["taints"].size()));
      unsigned i = 0;
      for (const auto& t : n["taints"]) {
        const std::string text = t.as<std::string>();
        const size_t colon = text.rfind(':');
        const std::string kv = text.substr(0, colon);
        const size_t eq = kv.find('=');
        list[i].setKey(kv.substr(0, eq));
        list[i].setValue(eq == std::string::npos ? "" : kv.substr(eq + 1));
        list[i++].setEffect(colon == std::string::npos ? "" : text.substr(colon + 1));
      }
    }
    if (n["nonTasUsage"]) {
      auto list = node.initNonTasUsage(static_cast<unsigned>(n["nonTasUsage"].size()));
      unsigned i = 0;
      for (const auto& c : n["nonTasUsage"]) {
        int64_t milli = 0;
        ADM_RETURN_IF_ERROR(Parsed(schema::ParseQuantityMilli(c.second.as<std::string>()),
                                   where_, "nonTasUsage", &milli));
        list[i].setName(c.first.as<std::string>());
        list[i++].setMilli(milli);
      }
    }
    return Status::Ok();
  }

  Status Maintenance() {
    const YAML::Node w = step_["maintenance"];
    if (!w) return Status::Ok();
    int64_t from_ns = 0, to_ns = 0;
    ADM_RETURN_IF_ERROR(
        Parsed(ParseRfc3339(w["from"].as<std::string>()), where_, "from", &from_ns));
    ADM_RETURN_IF_ERROR(Parsed(ParseRfc3339(w["to"].as<std::string>()), where_, "to", &to_ns));
    capnp::MallocMessageBuilder m;
    auto win = m.initRoot<schema::Event>().initBody().initMaintenanceWindowDefined();
    win.setName(w["name"].as<std::string>());
    win.setFlavor(w["flavor"].as<std::string>());
    win.setStartNs(from_ns);
    win.setEndNs(to_ns);
    return Record({schema::EncodeEvent(m)}, "operator");
  }

  Status Configure() {
    const YAML::Node c = step_["configure"];
    if (!c) return Status::Ok();
    capnp::MallocMessageBuilder m;
    auto cfg = m.initRoot<schema::Event>().initBody().initEngineConfigDefined();
    // A duration (or, with `retention`, a retention) under `key`, when given.
    auto duration = [&](const char* key, bool retention, auto set) -> Status {
      if (!c[key]) return Status::Ok();
      const std::string text = c[key].as<std::string>();
      int64_t ns = 0;
      ADM_RETURN_IF_ERROR(Parsed(retention ? schema::ParseRetentionNs(text)
                                           : schema::ParseDurationNs(text),
                                 where_, key, &ns));
      set(ns);
      return Status::Ok();
    };
    ADM_RETURN_IF_ERROR(duration("podsReadyTimeout", false, [&](int64_t ns) {
      cfg.setWaitForPodsReadyEnabled(true);
      cfg.setPodsReadyTimeoutNs(ns);
    }));
    if (c["backoffBaseSeconds"]) cfg.setBackoffBaseSeconds(c["backoffBaseSeconds"].as<int>());
    if (c["backoffMaxSeconds"]) cfg.setBackoffMaxSeconds(c["backoffMaxSeconds"].as<int>());
    if (c["backoffLimitCount"]) cfg.setBackoffLimitCount(c["backoffLimitCount"].as<int>());
    ADM_RETURN_IF_ERROR(duration("agingStep", false, [&](int64_t ns) { cfg.setAgingStepNs(ns); }));
    if (c["agingMax"]) cfg.setAgingPriorityMax(c["agingMax"].as<int>());
    if (c["fairSharing"]) cfg.setFairSharingEnabled(c["fairSharing"].as<bool>());
    if (const YAML::Node s = c["preemptionStrategies"]) {
      // Kueue's Configuration.fairSharing.preemptionStrategies.
      auto list = cfg.initFairSharingPreemptionStrategies(static_cast<unsigned>(s.size()));
      for (unsigned i = 0; i < s.size(); ++i) list.set(i, s[i].as<std::string>());
    }
    if (const YAML::Node afs = c["admissionFairSharing"]) {
      // Kueue's Configuration.admissionFairSharing, as written there.
      ADM_RETURN_IF_ERROR(CheckKeys(afs, {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"},
                                    where_, "configure.admissionFairSharing"));
      int64_t half = 0, sampling = 0;
      ADM_RETURN_IF_ERROR(Parsed(schema::ParseDurationNs(afs["usageHalfLifeTime"].as<std::string>()),
                                 where_, "usageHalfLifeTime", &half));
      ADM_RETURN_IF_ERROR(Parsed(schema::ParseDurationNs(afs["usageSamplingInterval"].as<std::string>()),
                                 where_, "usageSamplingInterval", &sampling));
      cfg.setAfsUsageHalfLifeNs(half);
      cfg.setAfsUsageSamplingIntervalNs(sampling);
      const YAML::Node weights = afs["resourceWeights"];
      auto list = cfg.initAfsResourceWeights(weights ? static_cast<unsigned>(weights.size()) : 0);
      unsigned i = 0;
      for (auto it = weights.begin(); weights && it != weights.end(); ++it, ++i) {
        int64_t milli = 0;
        ADM_RETURN_IF_ERROR(Parsed(schema::ParseQuantityMilli(it->second.as<std::string>()), where_,
                                   "resourceWeights", &milli));
        list[i].setName(it->first.as<std::string>());
        list[i].setMilli(milli);
      }
    }
    ADM_RETURN_IF_ERROR(
        duration("retainFinished", true, [&](int64_t ns) { cfg.setRetainFinishedNs(ns); }));
    ADM_RETURN_IF_ERROR(
        duration("retainDeactivated", true, [&](int64_t ns) { cfg.setRetainDeactivatedNs(ns); }));
    return Record({schema::EncodeEvent(m)}, "operator");
  }

  StepRunner& r_;
  const YAML::Node step_;
  const std::string where_;
  std::string refused_;  // `refused:`: the refusal every input of the step must meet
  StepOutcome outcome_;
};

Result<StepOutcome> StepRunner::Run(const YAML::Node& step, size_t index) {
  const std::string where = StepWhere(file_, step, index);
  // A value of the wrong type (yaml-cpp throws) or out of range (std::stoull throws).
  try {
    return Step(*this, step, where).Run();
  } catch (const std::exception& e) {
    return Refuse(where, std::string("unreadable step: ") + e.what());
  }
}

}  // namespace admission::testing
