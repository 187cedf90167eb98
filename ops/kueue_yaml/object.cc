// One object: a List of objects, apiVersion and kind, metadata, and the event it becomes.

#include <limits>

#include "ops/kueue_yaml/parser.h"
#include "schema/time_format.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseObject(const YAML::Node& obj, const std::string& p, bool top_level,
                                 std::string_view default_api_version,
                                 std::string_view default_kind) {
  kind_.clear();
  name_.clear();
  if (!obj.IsMap()) {
    return Fail(obj, p,
                std::string("expected a Kubernetes object (a mapping with apiVersion, "
                            "kind and metadata), got ") +
                    DescribeNode(obj));
  }
  if (!ExpectMap(obj, p)) return false;
  std::string api_version(default_api_version);
  std::string kind(default_kind);
  if (!OptString(obj, "apiVersion", p, &api_version) || !OptString(obj, "kind", p, &kind)) {
    return false;
  }
  if (kind.empty()) return Fail(obj, Join(p, "kind"), "required");
  if (api_version.empty()) return Fail(obj, Join(p, "apiVersion"), "required");
  kind_ = kind;

  if (kind == "List" || (kind == "WorkloadList" && mode_ != Mode::kApply)) {
    return ParseList(obj, p, top_level, api_version, kind);
  }
  if (out_->size() >= kYamlObjectsMax) {
    return Fail(obj, p,
                "more than " + std::to_string(kYamlObjectsMax) +
                    " objects in one file (the most one atomic append takes)");
  }
  return ParseOneObject(obj, p, api_version, kind);
}

bool DocumentParser::ParseOneObject(const YAML::Node& obj, const std::string& p,
                                    const std::string& api_version, const std::string& kind) {
  FieldTracker fields;
  fields.Accept(obj, {"apiVersion", "kind"});  // read by ParseObject
  bool ok = false;
  {
    TrackFields tracking(&fields);
    switch (mode_) {
      case Mode::kApply:
        ok = ParseApplyObject(obj, p, api_version, kind);
        break;
      case Mode::kSubmit:
        ok = ParseSubmitObject(obj, p, api_version, kind);
        break;
      case Mode::kImport:
        ok = ParseImportObject(obj, p, api_version, kind);
        break;
      case Mode::kDelete:
        return ParseDeleteObject(obj, p, api_version, kind);  // kubectl delete reads names only
    }
  }
  const FieldValidation validation =
      options_ != nullptr ? options_->field_validation : FieldValidation::kStrict;
  if (!ok || validation == FieldValidation::kIgnore) return ok;
  std::optional<FieldTracker::Unknown> unknown = fields.FindUnknown(obj, p);
  if (!unknown) return true;
  const std::string hint = unknown->suggestion.empty()
                               ? ""
                               : "; did you mean " + Quote(unknown->suggestion) + "?";
  if (validation == FieldValidation::kWarn) {
    if (options_->warnings != nullptr) {
      options_->warnings->push_back(kind + " " + name_ + ": unknown field " +
                                    Quote(unknown->path) + hint + " (ignored)");
    }
    return true;
  }
  return Fail(unknown->key, unknown->path,
              "unknown field " + Quote(unknown->name) + hint +
                  " (refused as kubectl apply refuses it; --validate=false accepts it)");
}

// A `kind: List` (any definitions or submissions) or a WorkloadList (its items' kind implied).
bool DocumentParser::ParseList(const YAML::Node& obj, const std::string& p, bool top_level,
                               const std::string& api_version, const std::string& kind) {
  if (!top_level) return Fail(obj, Join(p, "kind"), "a List inside a List is not supported");
  if (kind == "List" && api_version != "v1") {
    return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
                Quote(api_version) + " is not supported for a List: expected v1");
  }
  if (kind == "WorkloadList" && !IsKueueApi(api_version)) {
    return FailApiVersion(obj, p, api_version);
  }
  const YAML::Node items = Child(obj, "items");
  const std::string ip = Join(p, "items");
  if (Absent(items)) return true;  // an empty list
  if (!ExpectSequence(items, ip, kYamlObjectsMax)) return false;
  for (size_t i = 0; i < items.size(); ++i) {
    const bool typed = kind == "WorkloadList";
    if (!ParseObject(items[i], Index(ip, i), false, typed ? api_version : "",
                     typed ? "Workload" : "")) {
      return false;
    }
  }
  return true;
}

bool DocumentParser::ParseSubmitObject(const YAML::Node& obj, const std::string& p,
                                       const std::string& api_version, const std::string& kind) {
  if (kind == "Job") {
    if (api_version != kApiBatchV1) {
      return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
                  Quote(api_version) + " is not supported for a Job: expected batch/v1");
    }
    return ParseJob(obj, p);
  }
  if (kind == "JobSet") {
    if (api_version != kApiJobSetV1alpha2) {
      return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
                  Quote(api_version) +
                      " is not supported for a JobSet: expected jobset.x-k8s.io/v1alpha2");
    }
    return ParseJobSet(obj, p);
  }
  if (kind == "Workload") {
    if (!IsKueueApi(api_version)) return FailApiVersion(obj, p, api_version);
    return ParseWorkload(obj, p, api_version == kApiV1beta2, /*import=*/false);
  }
  return Fail(Child(obj, "kind"), Join(p, "kind"),
              Quote(kind) +
                  " cannot be submitted (expected a kueue.x-k8s.io Workload, a batch/v1 Job "
                  "or a jobset.x-k8s.io/v1alpha2 JobSet)" +
                  (IsApplyKind(kind) ? "; definitions are applied" : ""));
}

bool DocumentParser::ParseImportObject(const YAML::Node& obj, const std::string& p,
                                       const std::string& api_version, const std::string& kind) {
  if (kind == "Workload") {
    if (!IsKueueApi(api_version)) return FailApiVersion(obj, p, api_version);
    return ParseWorkload(obj, p, api_version == kApiV1beta2, /*import=*/true);
  }
  return Fail(Child(obj, "kind"), Join(p, "kind"),
              Quote(kind) +
                  " cannot be imported (expected kueue.x-k8s.io Workloads with "
                  "status.admission, e.g. kubectl get workloads -o yaml)");
}

// A deletion names the object only, as `kubectl delete -f` reads a file: apiVersion, kind and
// metadata (its name, and its namespace for a LocalQueue); the spec is not read.
bool DocumentParser::ParseDeleteObject(const YAML::Node& obj, const std::string& p,
                                       const std::string& api_version, const std::string& kind) {
  if (!IsApplyKind(kind)) {
    return Fail(Child(obj, "kind"), Join(p, "kind"),
                Quote(kind) +
                    " cannot be deleted here (expected ResourceFlavor, Cohort, ClusterQueue, "
                    "LocalQueue, AdmissionCheck, WorkloadPriorityClass, Topology or "
                    "BudgetPolicy)" +
                    (kind == "Job" || kind == "JobSet" || kind == "Workload"
                         ? "; a workload is deleted with `admitctl delete NAMESPACE/NAME`"
                         : ""));
  }
  if (!ApiOfKind(kind, api_version)) return FailApiVersion(obj, p, api_version);
  Meta meta(obj);
  const Scope scope = kind == "LocalQueue" ? Scope::kNamespaced : Scope::kCluster;
  if (!ReadMeta(obj, p, scope, false, &meta)) return false;
  capnp::MallocMessageBuilder message;
  auto del = message.initRoot<schema::Event>().getBody().initObjectDeleted();
  del.setKind(T(kind));
  del.setNamespace(T(meta.ns));
  del.setName(T(meta.name));
  return Emit(message, obj, p, kind, kind_, meta.ns, meta.name);
}

bool DocumentParser::IsKueueApi(std::string_view api_version) {
  return api_version == kApiV1beta1 || api_version == kApiV1beta2;
}

bool DocumentParser::IsApplyKind(std::string_view kind) {
  return kind == "ResourceFlavor" || kind == "Cohort" || kind == "ClusterQueue" ||
         kind == "LocalQueue" || kind == "AdmissionCheck" || kind == "WorkloadPriorityClass" ||
         kind == "Topology" || kind == "BudgetPolicy";
}

bool DocumentParser::ApiOfKind(std::string_view kind, std::string_view api_version) {
  return kind == "BudgetPolicy" ? api_version == kApiBudgetV1alpha1 : IsKueueApi(api_version);
}

bool DocumentParser::FailApiVersion(const YAML::Node& obj, const std::string& p,
                                    const std::string& api_version) {
  if (kind_ == "BudgetPolicy") {
    return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
                Quote(api_version) + " is not supported for BudgetPolicy: expected " +
                    std::string(kApiBudgetV1alpha1));
  }
  return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
              Quote(api_version) + " is not supported for " + kind_ + ": expected " +
                  std::string(kApiV1beta1) + " or " + std::string(kApiV1beta2));
}

bool DocumentParser::ParseApplyObject(const YAML::Node& obj, const std::string& p,
                                      const std::string& api_version, const std::string& kind) {
  if (!IsApplyKind(kind)) {
    std::string hint;
    if (kind == "Job" || kind == "JobSet" || kind == "Workload") {
      hint = "; workloads are submitted, not applied";
    }
    return Fail(Child(obj, "kind"), Join(p, "kind"),
                Quote(kind) +
                    " cannot be applied (expected ResourceFlavor, Cohort, "
                    "ClusterQueue, LocalQueue, AdmissionCheck, "
                    "WorkloadPriorityClass, Topology or BudgetPolicy)" +
                    hint);
  }
  if (!ApiOfKind(kind, api_version)) return FailApiVersion(obj, p, api_version);
  if (kind == "BudgetPolicy") return ParseBudgetPolicy(obj, p);
  const bool v1beta2 = api_version == kApiV1beta2;
  if (kind == "ResourceFlavor") return ParseResourceFlavor(obj, p);
  if (kind == "Cohort") return ParseCohort(obj, p, v1beta2);
  if (kind == "ClusterQueue") return ParseClusterQueue(obj, p, v1beta2);
  if (kind == "LocalQueue") return ParseLocalQueue(obj, p);
  if (kind == "AdmissionCheck") return ParseAdmissionCheck(obj, p);
  if (kind == "Topology") return ParseTopology(obj, p);
  return ParsePriorityClass(obj, p);
}

// The node of metadata.<field>[key], for error locations; metadata itself when missing.
YAML::Node DocumentParser::MetaEntry(const Meta& meta, std::string_view field,
                                     std::string_view key) {
  const YAML::Node n = Child(Child(meta.node, field), key);
  return n.IsDefined() ? n : meta.node;
}

// Reads metadata. With `generate`, a missing name may come from generateName: the prefix and
// five characters derived from the seed, the document number, the object's place in the
// document and the document's text, so the same submission always yields the same name.
bool DocumentParser::ReadMeta(const YAML::Node& obj, const std::string& p, Scope scope,
                              bool generate, Meta* meta) {
  const std::string mp = Join(p, "metadata");
  if (Absent(meta->node)) return Fail(obj, mp, "required: metadata.name names the object");
  if (!ExpectMap(meta->node, mp)) return false;
  if (!OptString(meta->node, "name", mp, &meta->name)) return false;
  if (meta->name.empty() && generate) {
    std::string prefix;
    if (!OptString(meta->node, "generateName", mp, &prefix)) return false;
    if (!prefix.empty()) {
      if (prefix.size() > kGenerateNamePrefixMax) prefix.resize(kGenerateNamePrefixMax);
      const std::string seed = ctx_ == nullptr ? std::string() : ctx_->name_seed;
      meta->name = prefix + GeneratedSuffix(Sha256Parts({"generateName", seed,
                                                         std::to_string(error_.document_number),
                                                         p, raw_.text}));
      if (!IsDnsSubdomain(meta->name)) {
        return Fail(Child(meta->node, "generateName"), Join(mp, "generateName"),
                    Quote(prefix) + " does not make a valid name: " + kSubdomainRule);
      }
    }
  }
  if (meta->name.empty()) {
    return Fail(meta->node, Join(mp, "name"),
                generate ? "required: give metadata.name or metadata.generateName"
                         : "required: every object needs a name");
  }
  if (!CheckSubdomain(Child(meta->node, "name"), Join(mp, "name"), meta->name)) return false;
  name_ = meta->name;
  if (scope == Scope::kNamespaced) {
    meta->ns = "default";  // kubectl's default namespace
    const YAML::Node ns = Child(meta->node, "namespace");
    if (!Absent(ns)) {
      if (!ReadString(ns, Join(mp, "namespace"), &meta->ns)) return false;
      if (!IsDnsLabel(meta->ns)) {
        return Fail(ns, Join(mp, "namespace"),
                    Quote(meta->ns) + " is not a valid namespace: " + kLabelRule);
      }
    }
  }
  if (!OptString(meta->node, "uid", mp, &meta->uid)) return false;
  const YAML::Node labels = Child(meta->node, "labels");
  if (!Absent(labels) && !ReadStringMap(labels, Join(mp, "labels"), kMapEntriesMax,
                                        KeyRule::kLabel, &meta->labels)) {
    return false;
  }
  const YAML::Node annotations = Child(meta->node, "annotations");
  if (!Absent(annotations) && !ReadStringMap(annotations, Join(mp, "annotations"), kMapEntriesMax,
                                             KeyRule::kAnnotation, &meta->annotations)) {
    return false;
  }
  meta->annotations.erase(std::string(kLastAppliedAnnotation));
  const YAML::Node created = Child(meta->node, "creationTimestamp");
  if (!Absent(created)) {
    std::string text;
    if (!ReadString(created, Join(mp, "creationTimestamp"), &text)) return false;
    Result<int64_t> ns = ParseRfc3339(text);
    if (!ns.ok()) return Fail(created, Join(mp, "creationTimestamp"), ns.status().message());
    meta->creation_ns = *ns;
  }
  return true;
}

// The object's spec: absent reads as empty; present must be a mapping.
bool DocumentParser::CheckSpec(const YAML::Node& spec, const std::string& p) {
  return Absent(spec) || ExpectMap(spec, Join(p, "spec"));
}

bool DocumentParser::Emit(capnp::MallocMessageBuilder& message, const YAML::Node& at,
                          const std::string& p, std::string kind, std::string source_kind,
                          std::string ns, std::string name, std::string uid) {
  std::string event = schema::EncodeEvent(message);
  if (event.size() > schema::kEventBytesMax) {
    return Fail(at, p,
                "the event would be " + std::to_string(event.size()) + " bytes; at most " +
                    std::to_string(schema::kEventBytesMax) + " are allowed");
  }
  out_->push_back(ParsedObject{std::move(kind), std::move(source_kind), std::move(ns),
                               std::move(name), std::move(event), std::move(uid)});
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
