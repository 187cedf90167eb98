#include "ops/kueue_yaml.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <capnp/message.h>
#include <openssl/evp.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "schema/quantity.h"
#include "schema/time_format.h"
#include "schema/event_codec.h"

// Kueue fields accepted but not modelled (ignored), so that manifests written for Kueue load:
//   ClusterQueue  spec.admissionScope, spec.concurrentAdmissionPolicy, spec.defaultLocalQueue
//   ResourceFlavor spec.resourceWeights
//   LocalQueue    spec.wallTimePolicy
//   AdmissionCheck spec.parameters, spec.retryDelayMinutes
//   Workload      spec.podSets[].topologyRequest, template.metadata, nodeSelectorTerms matchFields,
//                 preferred node affinity, pod (anti-)affinity, status other than admission
//   Job           spec.suspend, completionMode, backoffLimit and every other batch field
// Any other unknown field is ignored too (Kueue evolves); a known field of the wrong type or
// with an invalid value is refused.

namespace admission::ops {

namespace {

// ---------------------------------------------------------------------------------------------
// Limits. Kueue's where it has one (its CRD validation), else ours, bounding work per document.

constexpr size_t kNameBytesMax = 253;          // RFC 1123 subdomain: object names
constexpr size_t kLabelBytesMax = 63;          // RFC 1123 label: namespaces, podSet names
constexpr size_t kGenerateNamePrefixMax = 58;  // Kubernetes: 63 minus the random suffix
constexpr size_t kGeneratedSuffixLength = 5;
constexpr size_t kResourceGroupsMax = 16;
constexpr size_t kGroupResourcesMax = 64;
constexpr size_t kGroupFlavorsMax = 64;
constexpr size_t kFlavorsTotalMax = 256;
constexpr size_t kCoveredResourcesTotalMax = 256;
constexpr size_t kAdmissionChecksMax = 64;
constexpr size_t kOnFlavorsMax = 64;
constexpr size_t kFlavorNodeLabelsMax = 8;
constexpr size_t kFlavorTaintsMax = 8;
constexpr size_t kFlavorTolerationsMax = 8;
constexpr size_t kPodSetsMax = 8;
constexpr size_t kContainersMax = 64;                // ours
constexpr size_t kMapEntriesMax = 256;               // ours: labels, nodeSelector, requests
constexpr size_t kListItemsMax = 256;                // ours: tolerations, requirements, values
constexpr size_t kAnnotationsBytesMax = 256 * 1024;  // Kubernetes' total annotation size

constexpr std::string_view kApiV1beta1 = "kueue.x-k8s.io/v1beta1";
constexpr std::string_view kApiV1beta2 = "kueue.x-k8s.io/v1beta2";
constexpr std::string_view kApiBatchV1 = "batch/v1";

// Kueue's labels and annotations.
constexpr std::string_view kQueueNameLabel = "kueue.x-k8s.io/queue-name";
constexpr std::string_view kPriorityClassLabel = "kueue.x-k8s.io/priority-class";
constexpr std::string_view kMaxExecTimeLabel = "kueue.x-k8s.io/max-exec-time-seconds";
constexpr std::string_view kJobMinParallelismAnnotation = "kueue.x-k8s.io/job-min-parallelism";
// Ours: policies that Kueue keeps elsewhere (controller flags) or not at all.
constexpr std::string_view kPendingTtlAnnotation = "admission-ledger.io/pending-ttl";
constexpr std::string_view kOnTimeoutAnnotation = "admission-ledger.io/on-timeout";
constexpr std::string_view kRetryLimitAnnotation = "admission-ledger.io/retry-limit";
constexpr std::string_view kBackoffBaseAnnotation = "admission-ledger.io/backoff-base";
constexpr std::string_view kBackoffMaxAnnotation = "admission-ledger.io/backoff-max";
constexpr std::string_view kMaxWaitAnnotation = "admission-ledger.io/max-wait";
constexpr std::string_view kExpectedRuntimeAnnotation = "admission-ledger.io/expected-runtime";
constexpr std::string_view kMaxExecutionAnnotation = "admission-ledger.io/max-execution";
// kubectl's copy of the whole object: noise in a ledger, and up to the annotation size limit.
constexpr std::string_view kLastAppliedAnnotation =
    "kubectl.kubernetes.io/last-applied-configuration";

constexpr std::string_view kWorkloadPriorityClassSource = "kueue.x-k8s.io/workloadpriorityclass";
constexpr std::string_view kPodPriorityClassSource = "scheduling.k8s.io/priorityclass";

constexpr int64_t kNsPerSecond = 1'000'000'000;

enum class Mode { kApply, kSubmit, kImport };

// ---------------------------------------------------------------------------------------------
// Small helpers.

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}
std::string MapKey(const std::string& path, std::string_view key) {
  return path + "[\"" + std::string(key) + "\"]";
}
std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

capnp::Text::Reader T(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > kLabelBytesMax) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > kNameBytesMax) return false;
  size_t begin = 0;
  while (true) {
    const size_t dot = s.find('.', begin);
    const std::string_view part =
        s.substr(begin, dot == std::string_view::npos ? s.npos : dot - begin);
    if (part.empty() || !IsLowerAlnum(part.front()) || !IsLowerAlnum(part.back())) return false;
    if (!std::all_of(part.begin(), part.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-'; })) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    begin = dot + 1;
  }
}

// The name part of a label key, and a non-empty label value: [A-Za-z0-9]([-A-Za-z0-9_.]*
// [A-Za-z0-9])?, at most 63 characters.
bool IsQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > kLabelBytesMax) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// Label and annotation keys: [prefix/]name, the prefix a DNS subdomain.
bool IsQualifiedName(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return IsQualifiedNamePart(s);
  return IsDnsSubdomain(s.substr(0, slash)) && IsQualifiedNamePart(s.substr(slash + 1));
}

bool IsLabelValue(std::string_view s) { return s.empty() || IsQualifiedNamePart(s); }

// Resource names ("cpu", "nvidia.com/gpu", "hugepages-2Mi", "cpu_credits"): a qualified name.
bool IsResourceName(std::string_view s) { return IsQualifiedName(s); }

constexpr const char* kSubdomainRule =
    "must be lowercase alphanumerics, '-' or '.', start and end with an alphanumeric, at most "
    "253 characters (RFC 1123 subdomain)";
constexpr const char* kLabelRule =
    "must be lowercase alphanumerics or '-', start and end with an alphanumeric, at most 63 "
    "characters (RFC 1123 label)";

// Plain YAML scalars that Kubernetes' YAML reader (YAML 1.1) does not read as strings: a string
// field given one of these is refused by the API server, so it is refused here too.
enum class ScalarKind { kString, kNull, kBool, kInt, kFloat };

bool IsYamlInt(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  if (s.empty()) return false;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    return std::all_of(s.begin() + 2, s.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == '_';
    });
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'b')) {
    return std::all_of(s.begin() + 2, s.end(), [](char c) { return IsDigit(c) || c == '_'; });
  }
  return IsDigit(s[0]) &&
         std::all_of(s.begin(), s.end(), [](char c) { return IsDigit(c) || c == '_'; });
}

bool IsYamlFloat(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  for (std::string_view special : {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"}) {
    if (s == special) return true;
  }
  size_t i = 0;
  size_t digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const size_t exponent_begin = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == exponent_begin) return false;
  }
  return i == s.size();
}

bool IsYamlBool(std::string_view s) {
  for (std::string_view b :
       {"y",    "Y",    "yes",   "Yes",   "YES",   "n",  "N",  "no", "No",  "NO",  "true",
        "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF"}) {
    if (s == b) return true;
  }
  return false;
}

ScalarKind KindOfScalar(const YAML::Node& n) {
  if (n.IsNull()) return ScalarKind::kNull;
  const std::string& tag = n.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return ScalarKind::kString;
  if (tag == "tag:yaml.org,2002:int") return ScalarKind::kInt;
  if (tag == "tag:yaml.org,2002:float") return ScalarKind::kFloat;
  if (tag == "tag:yaml.org,2002:bool") return ScalarKind::kBool;
  if (tag == "tag:yaml.org,2002:null") return ScalarKind::kNull;
  const std::string& s = n.Scalar();
  if (IsYamlBool(s)) return ScalarKind::kBool;
  if (IsYamlInt(s)) return ScalarKind::kInt;
  if (IsYamlFloat(s)) return ScalarKind::kFloat;
  return ScalarKind::kString;
}

const char* DescribeNode(const YAML::Node& n) {
  if (!n.IsDefined()) return "nothing";
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      switch (KindOfScalar(n)) {
        case ScalarKind::kBool:
          return "a boolean";
        case ScalarKind::kInt:
          return "an integer";
        case ScalarKind::kFloat:
          return "a number";
        case ScalarKind::kNull:
          return "null";
        case ScalarKind::kString:
          return "a string";
      }
      return "a scalar";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// Absent: missing or null (Kubernetes reads `field:` and `field: null` as unset).
bool Absent(const YAML::Node& n) { return !n.IsDefined() || n.IsNull(); }

// The value under `key`, undefined when the key is missing or `parent` is not a mapping.
// Never yaml-cpp's "zombie" node for a missing key, on which most operations throw.
// Nodes are references in yaml-cpp: assigning one node to another overwrites the document, so
// nodes here are only ever initialized, never assigned.
YAML::Node Child(const YAML::Node& parent, std::string_view key) {
  if (parent.IsDefined() && parent.IsMap()) {
    const YAML::Node value = parent[std::string(key)];
    if (value.IsDefined()) return value;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

using Digest = std::array<uint8_t, 32>;

// SHA-256 over length-prefixed parts, so that ("ab", "c") and ("a", "bc") differ.
Digest Sha256Parts(std::initializer_list<std::string_view> parts) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ADM_CHECK(ctx != nullptr, "EVP_MD_CTX_new");
  ADM_CHECK(EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1, "sha256 init");
  for (std::string_view part : parts) {
    std::array<uint8_t, 8> length{};
    uint64_t size = part.size();
    for (uint8_t& byte : length) {
      byte = static_cast<uint8_t>(size & 0xff);
      size >>= 8;
    }
    ADM_CHECK(EVP_DigestUpdate(ctx, length.data(), length.size()) == 1, "sha256 update");
    ADM_CHECK(EVP_DigestUpdate(ctx, part.data(), part.size()) == 1, "sha256 update");
  }
  Digest digest{};
  unsigned int digest_length = 0;
  ADM_CHECK(
      EVP_DigestFinal_ex(ctx, digest.data(), &digest_length) == 1 && digest_length == digest.size(),
      "sha256 final");
  EVP_MD_CTX_free(ctx);
  return digest;
}

// Kubernetes' alphabet for generated names: no vowels (no words), no confusable 0/1/3.
constexpr std::string_view kGeneratedNameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

std::string GeneratedSuffix(const Digest& digest) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  std::string suffix;
  for (size_t i = 0; i < kGeneratedSuffixLength; ++i) {
    suffix.push_back(kGeneratedNameAlphabet[v % kGeneratedNameAlphabet.size()]);
    v /= kGeneratedNameAlphabet.size();
  }
  return suffix;
}

// A UUID (RFC 9562 version 8, "custom") from the first 16 bytes of a digest.
std::string UuidFromDigest(Digest digest) {
  digest[6] = static_cast<uint8_t>((digest[6] & 0x0f) | 0x80);
  digest[8] = static_cast<uint8_t>((digest[8] & 0x3f) | 0x80);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string uuid;
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid.push_back('-');
    uuid.push_back(kHex[digest[i] >> 4]);
    uuid.push_back(kHex[digest[i] & 0x0f]);
  }
  return uuid;
}

void SetLabels(capnp::List<schema::Label>::Builder list,
               const std::map<std::string, std::string>& labels) {
  unsigned i = 0;
  for (const auto& [key, value] : labels) {
    list[i].setKey(T(key));
    list[i].setValue(T(value));
    ++i;
  }
}

void SetResources(capnp::List<schema::ResourceAmount>::Builder list,
                  const std::map<std::string, int64_t>& amounts) {
  unsigned i = 0;
  for (const auto& [name, milli] : amounts) {
    list[i].setName(T(name));
    list[i].setMilli(milli);
    ++i;
  }
}

// A document's text and where it starts in the file.
struct RawDocument {
  std::string_view text;
  size_t first_line;  // 1-based
};

// Splits a YAML stream at document markers, so that each document's own text is known (it
// seeds generated names) and line numbers can be made absolute. A line starting with "---" or
// "..." followed by a space or the end of the line is always a marker in YAML: no scalar may
// contain one. Comments and directives before a document's "---" stay with that document.
std::vector<RawDocument> SplitDocuments(std::string_view text) {
  std::vector<RawDocument> documents;
  size_t chunk_begin = 0;
  size_t chunk_line = 1;
  bool chunk_has_content = false;
  auto close_chunk = [&](size_t end) {
    if (end > chunk_begin) {
      documents.push_back({text.substr(chunk_begin, end - chunk_begin), chunk_line});
    }
  };
  size_t line = 1;
  for (size_t pos = 0; pos < text.size(); ++line) {
    const size_t eol = text.find('\n', pos);
    const size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view l =
        text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    auto is_marker = [&](std::string_view marker) {
      return l.starts_with(marker) && (l.size() == 3 || l[3] == ' ' || l[3] == '\t');
    };
    auto has_content = [](std::string_view rest) {
      const size_t first = rest.find_first_not_of(" \t");
      return first != std::string_view::npos && rest[first] != '#';
    };
    if (is_marker("---")) {
      if (chunk_has_content) {
        close_chunk(pos);
        chunk_begin = pos;
        chunk_line = line;
      }
      chunk_has_content = has_content(l.substr(3));
    } else if (is_marker("...")) {
      close_chunk(pos);
      chunk_begin = next;
      chunk_line = line + 1;
      chunk_has_content = false;
    } else if (l.starts_with("%")) {
      if (chunk_has_content) {
        close_chunk(pos);
        chunk_begin = pos;
        chunk_line = line;
        chunk_has_content = false;
      }
    } else if (has_content(l)) {
      chunk_has_content = true;
    }
    pos = next;
  }
  close_chunk(text.size());
  return documents;
}

// ---------------------------------------------------------------------------------------------
// The parser of one document. Every Read/Parse method returns false after recording the first
// error (with the path and line of the offending node); callers return false at once.

class DocumentParser {
 public:
  DocumentParser(Mode mode, const SubmitContext* ctx, size_t document_number,
                 const RawDocument& raw, std::vector<ParsedObject>* out)
      : mode_(mode), ctx_(ctx), raw_(raw), out_(out) {
    error_.document_number = document_number;
  }

  const YamlError& error() const { return error_; }

  // Records an error found by the caller (YAML syntax) at a line relative to the document.
  void FailAtLine(size_t relative_line, std::string reason) {
    error_.line = raw_.first_line + relative_line;
    error_.reason = std::move(reason);
  }

  // Parses one object (or, at the top level, a List of objects) and appends its events.
  bool ParseObject(const YAML::Node& obj, const std::string& p, bool top_level,
                   std::string_view default_api_version = {}, std::string_view default_kind = {}) {
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

    if (out_->size() >= kYamlObjectsMax) {
      return Fail(obj, p,
                  "more than " + std::to_string(kYamlObjectsMax) +
                      " objects in one file (the most one atomic append takes)");
    }
    switch (mode_) {
      case Mode::kApply:
        return ParseApplyObject(obj, p, api_version, kind);
      case Mode::kSubmit:
        if (kind == "Job") {
          if (api_version != kApiBatchV1) {
            return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
                        Quote(api_version) + " is not supported for a Job: expected batch/v1");
          }
          return ParseJob(obj, p);
        }
        if (kind == "Workload") {
          if (!IsKueueApi(api_version)) return FailApiVersion(obj, p, api_version);
          return ParseWorkload(obj, p, api_version == kApiV1beta2, /*import=*/false);
        }
        return Fail(Child(obj, "kind"), Join(p, "kind"),
                    Quote(kind) +
                        " cannot be submitted (expected a kueue.x-k8s.io Workload or a "
                        "batch/v1 Job)" +
                        (IsApplyKind(kind) ? "; definitions are applied" : ""));
      case Mode::kImport:
        if (kind == "Workload") {
          if (!IsKueueApi(api_version)) return FailApiVersion(obj, p, api_version);
          return ParseWorkload(obj, p, api_version == kApiV1beta2, /*import=*/true);
        }
        return Fail(Child(obj, "kind"), Join(p, "kind"),
                    Quote(kind) +
                        " cannot be imported (expected kueue.x-k8s.io Workloads with "
                        "status.admission, e.g. kubectl get workloads -o yaml)");
    }
    return false;
  }

 private:
  static bool IsKueueApi(std::string_view api_version) {
    return api_version == kApiV1beta1 || api_version == kApiV1beta2;
  }
  static bool IsApplyKind(std::string_view kind) {
    return kind == "ResourceFlavor" || kind == "Cohort" || kind == "ClusterQueue" ||
           kind == "LocalQueue" || kind == "AdmissionCheck" || kind == "WorkloadPriorityClass";
  }

  bool FailApiVersion(const YAML::Node& obj, const std::string& p, const std::string& api_version) {
    return Fail(Child(obj, "apiVersion"), Join(p, "apiVersion"),
                Quote(api_version) + " is not supported for " + kind_ + ": expected " +
                    std::string(kApiV1beta1) + " or " + std::string(kApiV1beta2));
  }

  bool ParseApplyObject(const YAML::Node& obj, const std::string& p, const std::string& api_version,
                        const std::string& kind) {
    if (!IsApplyKind(kind)) {
      std::string hint;
      if (kind == "Job" || kind == "Workload") hint = "; workloads are submitted, not applied";
      return Fail(Child(obj, "kind"), Join(p, "kind"),
                  Quote(kind) +
                      " cannot be applied (expected ResourceFlavor, Cohort, "
                      "ClusterQueue, LocalQueue, AdmissionCheck or "
                      "WorkloadPriorityClass)" +
                      hint);
    }
    if (!IsKueueApi(api_version)) return FailApiVersion(obj, p, api_version);
    const bool v1beta2 = api_version == kApiV1beta2;
    if (kind == "ResourceFlavor") return ParseResourceFlavor(obj, p);
    if (kind == "Cohort") return ParseCohort(obj, p, v1beta2);
    if (kind == "ClusterQueue") return ParseClusterQueue(obj, p, v1beta2);
    if (kind == "LocalQueue") return ParseLocalQueue(obj, p);
    if (kind == "AdmissionCheck") return ParseAdmissionCheck(obj, p);
    return ParsePriorityClass(obj, p);
  }

  // ------------------------------------------------------------------------------------------
  // Errors and typed reads.

  bool Fail(const YAML::Node& at, const std::string& path, std::string reason) {
    if (error_.reason.empty()) {
      error_.kind = kind_;
      error_.name = name_;
      error_.field_path = path;
      error_.reason = std::move(reason);
      if (at.IsDefined() && !at.Mark().is_null()) {
        error_.line = raw_.first_line + static_cast<size_t>(at.Mark().line);
      }
    }
    return false;
  }

  // A mapping with string keys, none repeated, no merge keys (which Kubernetes' reader expands
  // and yaml-cpp does not).
  bool ExpectMap(const YAML::Node& n, const std::string& path) {
    if (!n.IsMap()) return Fail(n, path, std::string("expected a mapping, got ") + DescribeNode(n));
    std::set<std::string> keys;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) return Fail(key, path, "mapping keys must be strings");
      if (key.Scalar() == "<<" && key.Tag() == "?") {
        return Fail(key, Join(path, "<<"), "YAML merge keys are not supported");
      }
      if (!keys.insert(key.Scalar()).second) {
        return Fail(key, Join(path, key.Scalar()), "duplicate key " + Quote(key.Scalar()));
      }
    }
    return true;
  }

  bool ExpectSequence(const YAML::Node& n, const std::string& path, size_t max_items) {
    if (!n.IsSequence()) {
      return Fail(n, path, std::string("expected a list, got ") + DescribeNode(n));
    }
    if (n.size() > max_items) {
      return Fail(n, path,
                  "has " + std::to_string(n.size()) + " items; at most " +
                      std::to_string(max_items) + " are allowed");
    }
    return true;
  }

  // REQUIRES: !Absent(n).
  bool ReadString(const YAML::Node& n, const std::string& path, std::string* out) {
    if (!n.IsScalar() || KindOfScalar(n) != ScalarKind::kString) {
      std::string reason = std::string("expected a string, got ") + DescribeNode(n);
      if (n.IsScalar()) reason += " (" + n.Scalar() + "); quote it";
      return Fail(n, path, reason);
    }
    if (n.Scalar().find('\0') != std::string::npos) {
      return Fail(n, path, "contains a NUL character");
    }
    *out = n.Scalar();
    return true;
  }

  // Leaves *out unchanged when the field is absent.
  bool OptString(const YAML::Node& parent, std::string_view key, const std::string& p,
                 std::string* out) {
    const YAML::Node n = Child(parent, key);
    if (Absent(n)) return true;
    return ReadString(n, Join(p, key), out);
  }

  bool ReqString(const YAML::Node& parent, std::string_view key, const std::string& p,
                 std::string* out, std::string_view what) {
    const YAML::Node n = Child(parent, key);
    if (Absent(n)) return Fail(parent, Join(p, key), "required: " + std::string(what));
    if (!ReadString(n, Join(p, key), out)) return false;
    if (out->empty()) return Fail(n, Join(p, key), "must not be empty: " + std::string(what));
    return true;
  }

  // A decimal integer in [min, max]. REQUIRES: !Absent(n).
  bool ReadInt(const YAML::Node& n, const std::string& path, int64_t min, int64_t max,
               int64_t* out) {
    if (!n.IsScalar() || KindOfScalar(n) != ScalarKind::kInt) {
      return Fail(n, path,
                  std::string("expected an integer, got ") + DescribeNode(n) +
                      (n.IsScalar() ? " (" + n.Scalar() + ")" : ""));
    }
    Result<int64_t> v = ParseDecimal(n.Scalar(), min, max);
    if (!v.ok()) return Fail(n, path, v.status().message());
    *out = *v;
    return true;
  }

  static Result<int64_t> ParseDecimal(std::string_view s, int64_t min, int64_t max) {
    const std::string original(s);
    bool negative = false;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
      negative = s[0] == '-';
      s.remove_prefix(1);
    }
    if (s.empty() || !std::all_of(s.begin(), s.end(), IsDigit)) {
      return Status(Code::kInvalidArgument, Quote(original) + " is not a decimal integer");
    }
    __int128 v = 0;
    for (char c : s) {
      v = v * 10 + (c - '0');
      if (v > (__int128{1} << 64)) break;
    }
    if (negative) v = -v;
    if (v < min || v > max) {
      return Status(Code::kInvalidArgument, Quote(original) + " is out of range [" +
                                                std::to_string(min) + ", " + std::to_string(max) +
                                                "]");
    }
    return static_cast<int64_t>(v);
  }

  bool ReadInt32(const YAML::Node& n, const std::string& path, int64_t min, int32_t* out) {
    int64_t v = 0;
    if (!ReadInt(n, path, min, std::numeric_limits<int32_t>::max(), &v)) return false;
    *out = static_cast<int32_t>(v);
    return true;
  }

  bool ReadBool(const YAML::Node& n, const std::string& path, bool* out) {
    if (!n.IsScalar() || KindOfScalar(n) != ScalarKind::kBool) {
      return Fail(n, path,
                  std::string("expected true or false, got ") + DescribeNode(n) +
                      (n.IsScalar() ? " (" + n.Scalar() + ")" : ""));
    }
    // YAML 1.1 spellings too (yes, on...), as Kubernetes' reader takes them.
    const char first = n.Scalar()[0];
    *out = first == 't' || first == 'T' || first == 'y' || first == 'Y' || n.Scalar() == "on" ||
           n.Scalar() == "On" || n.Scalar() == "ON";
    return true;
  }

  // A quantity in milli-units; YAML numbers ("nominalQuota: 9") and strings ("9Gi") both.
  bool ReadQuantity(const YAML::Node& n, const std::string& path, int64_t* out) {
    const ScalarKind kind = n.IsScalar() ? KindOfScalar(n) : ScalarKind::kNull;
    if (!n.IsScalar() || kind == ScalarKind::kBool || kind == ScalarKind::kNull) {
      return Fail(
          n, path,
          std::string("expected a quantity such as 9, 1.5, 500m or 36Gi, got ") + DescribeNode(n));
    }
    Result<int64_t> milli = schema::ParseQuantityMilli(n.Scalar());
    if (!milli.ok()) return Fail(n, path, milli.status().message());
    if (*milli < 0) return Fail(n, path, Quote(n.Scalar()) + " must not be negative");
    *out = *milli;
    return true;
  }

  bool ReadEnum(const YAML::Node& n, const std::string& path,
                std::initializer_list<std::string_view> allowed, std::string* out) {
    if (!ReadString(n, path, out)) return false;
    for (std::string_view a : allowed) {
      if (*out == a) return true;
    }
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return Fail(n, path, Quote(*out) + " is not one of " + list);
  }

  bool ReadStringList(const YAML::Node& n, const std::string& path, size_t max_items,
                      std::vector<std::string>* out) {
    if (!ExpectSequence(n, path, max_items)) return false;
    out->clear();
    for (size_t i = 0; i < n.size(); ++i) {
      std::string s;
      if (Absent(n[i])) return Fail(n[i], Index(path, i), "must not be null");
      if (!ReadString(n[i], Index(path, i), &s)) return false;
      out->push_back(std::move(s));
    }
    return true;
  }

  enum class KeyRule { kLabel, kAnnotation, kResource };

  // A mapping of strings to strings (labels, annotations, nodeSelector).
  bool ReadStringMap(const YAML::Node& n, const std::string& path, size_t max_entries, KeyRule rule,
                     std::map<std::string, std::string>* out) {
    if (!ExpectMap(n, path)) return false;
    if (n.size() > max_entries) {
      return Fail(n, path,
                  "has " + std::to_string(n.size()) + " entries; at most " +
                      std::to_string(max_entries) + " are allowed");
    }
    size_t bytes = 0;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string key = it->first.Scalar();
      const std::string kp = MapKey(path, key);
      if (!IsQualifiedName(key)) {
        return Fail(it->first, kp,
                    Quote(key) +
                        " is not a valid key: [prefix/]name, the name at "
                        "most 63 alphanumerics, '-', '_' or '.'");
      }
      std::string value;
      if (Absent(it->second)) {
        value.clear();
      } else if (!ReadString(it->second, kp, &value)) {
        return false;
      }
      if (rule == KeyRule::kLabel && !IsLabelValue(value)) {
        return Fail(it->second, kp,
                    Quote(value) +
                        " is not a valid label value: at most 63 "
                        "alphanumerics, '-', '_' or '.', starting and "
                        "ending with an alphanumeric");
      }
      bytes += key.size() + value.size();
      (*out)[key] = std::move(value);
    }
    if (rule == KeyRule::kAnnotation && bytes > kAnnotationsBytesMax) {
      return Fail(n, path,
                  "annotations total " + std::to_string(bytes) + " bytes; at most " +
                      std::to_string(kAnnotationsBytesMax) + " are allowed");
    }
    return true;
  }

  // A mapping of resource names to non-negative quantities.
  bool ReadResourceMap(const YAML::Node& n, const std::string& path,
                       std::map<std::string, int64_t>* out) {
    if (!ExpectMap(n, path)) return false;
    if (n.size() > kMapEntriesMax) {
      return Fail(n, path,
                  "has " + std::to_string(n.size()) + " entries; at most " +
                      std::to_string(kMapEntriesMax) + " are allowed");
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string name = it->first.Scalar();
      const std::string kp = MapKey(path, name);
      if (!IsResourceName(name)) {
        return Fail(it->first, kp, Quote(name) + " is not a resource name");
      }
      int64_t milli = 0;
      if (!ReadQuantity(it->second, kp, &milli)) return false;
      (*out)[name] = milli;
    }
    return true;
  }

  bool CheckSubdomain(const YAML::Node& at, const std::string& path, const std::string& name) {
    if (IsDnsSubdomain(name)) return true;
    return Fail(at, path, Quote(name) + " is not a valid name: " + kSubdomainRule);
  }

  bool ReadDurationAnnotation(const std::map<std::string, std::string>& annotations,
                              std::string_view key, const YAML::Node& metadata,
                              const std::string& p, int64_t* out_ns) {
    const auto it = annotations.find(std::string(key));
    if (it == annotations.end()) return true;
    Result<int64_t> ns = schema::ParseDurationNs(it->second);
    if (!ns.ok()) {
      const YAML::Node at = Child(Child(metadata, "annotations"), key);
      return Fail(at.IsDefined() ? at : metadata, MapKey(Join(p, "metadata.annotations"), key),
                  ns.status().message());
    }
    *out_ns = *ns;
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Metadata.

  struct Meta {
    explicit Meta(const YAML::Node& obj) : node(Child(obj, "metadata")) {}
    std::string name;
    std::string ns;
    std::string uid;
    std::map<std::string, std::string> labels;
    std::map<std::string, std::string> annotations;
    int64_t creation_ns = 0;
    const YAML::Node node;  // metadata
  };

  enum class Scope { kCluster, kNamespaced };

  // The node of metadata.<field>[key], for error locations; metadata itself when missing.
  static YAML::Node MetaEntry(const Meta& meta, std::string_view field, std::string_view key) {
    const YAML::Node n = Child(Child(meta.node, field), key);
    return n.IsDefined() ? n : meta.node;
  }

  // Reads metadata. With `generate`, a missing name may come from generateName: the prefix and
  // five characters derived from the seed, the document number, the object's place in the
  // document and the document's text, so the same submission always yields the same name.
  bool ReadMeta(const YAML::Node& obj, const std::string& p, Scope scope, bool generate,
                Meta* meta) {
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
  bool CheckSpec(const YAML::Node& spec, const std::string& p) {
    return Absent(spec) || ExpectMap(spec, Join(p, "spec"));
  }

  bool Emit(capnp::MallocMessageBuilder& message, const YAML::Node& at, const std::string& p,
            std::string kind, std::string source_kind, std::string ns, std::string name) {
    std::string event = schema::EncodeEvent(message);
    if (event.size() > schema::kEventBytesMax) {
      return Fail(at, p,
                  "the event would be " + std::to_string(event.size()) + " bytes; at most " +
                      std::to_string(schema::kEventBytesMax) + " are allowed");
    }
    out_->push_back(ParsedObject{std::move(kind), std::move(source_kind), std::move(ns),
                                 std::move(name), std::move(event)});
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Shared pieces of definitions.

  // resourceGroups of a ClusterQueue or Cohort, validated as Kueue's webhook and CRD do.
  // `can_borrow`: the object has a cohort (a parent), so borrowing and lending limits apply.
  template <typename DefBuilder>
  bool ParseResourceGroups(const YAML::Node& spec, const std::string& sp, bool can_borrow,
                           std::string_view needs, DefBuilder def) {
    const YAML::Node groups = Child(spec, "resourceGroups");
    if (Absent(groups)) return true;
    const std::string gp = Join(sp, "resourceGroups");
    if (!ExpectSequence(groups, gp, kResourceGroupsMax)) return false;
    auto groups_builder = def.initResourceGroups(static_cast<unsigned>(groups.size()));
    std::set<std::string> all_resources;
    std::set<std::string> all_flavors;
    for (size_t g = 0; g < groups.size(); ++g) {
      const YAML::Node group = groups[g];
      const std::string gpi = Index(gp, g);
      if (!ExpectMap(group, gpi)) return false;
      auto group_builder = groups_builder[static_cast<unsigned>(g)];

      const YAML::Node covered_node = Child(group, "coveredResources");
      const std::string cp = Join(gpi, "coveredResources");
      if (Absent(covered_node)) {
        return Fail(group, cp, "required: the resources this group's flavors give quota for");
      }
      std::vector<std::string> covered;
      if (!ReadStringList(covered_node, cp, kGroupResourcesMax, &covered)) return false;
      if (covered.empty()) return Fail(covered_node, cp, "must list at least one resource");
      for (size_t r = 0; r < covered.size(); ++r) {
        if (!IsResourceName(covered[r])) {
          return Fail(covered_node[r], Index(cp, r), Quote(covered[r]) + " is not a resource name");
        }
        if (!all_resources.insert(covered[r]).second) {
          return Fail(
              covered_node[r], Index(cp, r),
              "resource " + Quote(covered[r]) +
                  " is covered more than once; each resource belongs to one resource group");
        }
      }
      if (all_resources.size() > kCoveredResourcesTotalMax) {
        return Fail(covered_node, cp,
                    "more than " + std::to_string(kCoveredResourcesTotalMax) +
                        " covered resources in all resource groups");
      }
      auto covered_builder =
          group_builder.initCoveredResources(static_cast<unsigned>(covered.size()));
      for (size_t r = 0; r < covered.size(); ++r)
        covered_builder.set(static_cast<unsigned>(r), T(covered[r]));

      const YAML::Node flavors = Child(group, "flavors");
      const std::string fp = Join(gpi, "flavors");
      if (Absent(flavors)) {
        return Fail(group, fp, "required: the flavors that give quota for " + cp);
      }
      if (!ExpectSequence(flavors, fp, kGroupFlavorsMax)) return false;
      if (flavors.size() == 0) return Fail(flavors, fp, "must list at least one flavor");
      auto flavors_builder = group_builder.initFlavors(static_cast<unsigned>(flavors.size()));
      for (size_t f = 0; f < flavors.size(); ++f) {
        const YAML::Node flavor = flavors[f];
        const std::string fpi = Index(fp, f);
        if (!ExpectMap(flavor, fpi)) return false;
        std::string flavor_name;
        if (!ReqString(flavor, "name", fpi, &flavor_name, "the ResourceFlavor's name")) {
          return false;
        }
        if (!CheckSubdomain(Child(flavor, "name"), Join(fpi, "name"), flavor_name)) return false;
        if (!all_flavors.insert(flavor_name).second) {
          return Fail(Child(flavor, "name"), Join(fpi, "name"),
                      "flavor " + Quote(flavor_name) +
                          " appears more than once; each flavor belongs to one resource group");
        }
        if (all_flavors.size() > kFlavorsTotalMax) {
          return Fail(
              flavor, fpi,
              "more than " + std::to_string(kFlavorsTotalMax) + " flavors in all resource groups");
        }
        auto flavor_builder = flavors_builder[static_cast<unsigned>(f)];
        flavor_builder.setName(T(flavor_name));

        const YAML::Node resources = Child(flavor, "resources");
        const std::string rp = Join(fpi, "resources");
        std::string covered_list;
        for (const std::string& r : covered) covered_list += (covered_list.empty() ? "" : ", ") + r;
        if (Absent(resources)) {
          return Fail(flavor, rp,
                      "required: flavor " + Quote(flavor_name) +
                          " needs a nominalQuota for every covered resource (" + covered_list +
                          ")");
        }
        if (!ExpectSequence(resources, rp, kGroupResourcesMax)) return false;
        if (resources.size() != covered.size()) {
          return Fail(resources, rp,
                      "flavor " + Quote(flavor_name) + " gives quota for " +
                          std::to_string(resources.size()) +
                          " resources but coveredResources lists " +
                          std::to_string(covered.size()) + " (" + covered_list +
                          "): every flavor needs a nominalQuota for every covered resource, in "
                          "the same order");
        }
        auto resources_builder =
            flavor_builder.initResources(static_cast<unsigned>(resources.size()));
        for (size_t r = 0; r < resources.size(); ++r) {
          const YAML::Node resource = resources[r];
          const std::string rpi = Index(rp, r);
          if (!ExpectMap(resource, rpi)) return false;
          std::string resource_name;
          if (!ReqString(resource, "name", rpi, &resource_name, "the resource's name")) {
            return false;
          }
          if (resource_name != covered[r]) {
            return Fail(Child(resource, "name"), Join(rpi, "name"),
                        Quote(resource_name) + " is not coveredResources[" + std::to_string(r) +
                            "] " + Quote(covered[r]) +
                            ": every flavor lists exactly the covered "
                            "resources, in the same order");
          }
          auto quota = resources_builder[static_cast<unsigned>(r)];
          quota.setName(T(resource_name));
          const YAML::Node nominal = Child(resource, "nominalQuota");
          if (Absent(nominal)) {
            return Fail(resource, Join(rpi, "nominalQuota"),
                        "required: flavor " + Quote(flavor_name) + " needs a nominalQuota for " +
                            Quote(resource_name));
          }
          int64_t nominal_milli = 0;
          if (!ReadQuantity(nominal, Join(rpi, "nominalQuota"), &nominal_milli)) return false;
          quota.setNominalQuotaMilli(nominal_milli);
          const YAML::Node borrowing = Child(resource, "borrowingLimit");
          if (!Absent(borrowing)) {
            if (!can_borrow) {
              return Fail(borrowing, Join(rpi, "borrowingLimit"),
                          "must not be set without " + std::string(needs));
            }
            int64_t milli = 0;
            if (!ReadQuantity(borrowing, Join(rpi, "borrowingLimit"), &milli)) return false;
            quota.setHasBorrowingLimit(true);
            quota.setBorrowingLimitMilli(milli);
          }
          const YAML::Node lending = Child(resource, "lendingLimit");
          if (!Absent(lending)) {
            if (!can_borrow) {
              return Fail(lending, Join(rpi, "lendingLimit"),
                          "must not be set without " + std::string(needs));
            }
            int64_t milli = 0;
            if (!ReadQuantity(lending, Join(rpi, "lendingLimit"), &milli)) return false;
            if (milli > nominal_milli) {
              return Fail(lending, Join(rpi, "lendingLimit"),
                          "must not exceed nominalQuota (" +
                              schema::FormatQuantityMilli(nominal_milli, resource_name) + ")");
            }
            quota.setHasLendingLimit(true);
            quota.setLendingLimitMilli(milli);
          }
        }
      }
    }
    return true;
  }

  // fairSharing.weight, a quantity; absent leaves Kueue's default of 1.
  template <typename DefBuilder>
  bool ParseFairSharing(const YAML::Node& spec, const std::string& sp, DefBuilder def) {
    const YAML::Node fair = Child(spec, "fairSharing");
    if (Absent(fair)) return true;
    const std::string fp = Join(sp, "fairSharing");
    if (!ExpectMap(fair, fp)) return false;
    const YAML::Node weight = Child(fair, "weight");
    if (Absent(weight)) return true;
    int64_t milli = 0;
    if (!ReadQuantity(weight, Join(fp, "weight"), &milli)) return false;
    def.setFairSharingWeightMilli(milli);
    return true;
  }

  bool ParseStopPolicy(const YAML::Node& spec, const std::string& sp, schema::StopPolicy* out) {
    const YAML::Node n = Child(spec, "stopPolicy");
    if (Absent(n)) return true;
    std::string s;
    if (!ReadEnum(n, Join(sp, "stopPolicy"), {"None", "Hold", "HoldAndDrain"}, &s)) return false;
    *out = s == "Hold"           ? schema::StopPolicy::HOLD
           : s == "HoldAndDrain" ? schema::StopPolicy::HOLD_AND_DRAIN
                                 : schema::StopPolicy::NONE;
    return true;
  }

  // `init(n)` initializes the destination list of n tolerations.
  template <typename InitList>
  bool ParseTolerations(const YAML::Node& n, const std::string& path, size_t max_items,
                        InitList init) {
    if (!ExpectSequence(n, path, max_items)) return false;
    auto list = init(static_cast<unsigned>(n.size()));
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node t = n[i];
      const std::string tp = Index(path, i);
      if (!ExpectMap(t, tp)) return false;
      std::string key, op = "Equal", value, effect;
      if (!OptString(t, "key", tp, &key)) return false;
      const YAML::Node op_node = Child(t, "operator");
      if (!Absent(op_node) && !ReadEnum(op_node, Join(tp, "operator"), {"Equal", "Exists"}, &op)) {
        return false;
      }
      if (!OptString(t, "value", tp, &value)) return false;
      const YAML::Node effect_node = Child(t, "effect");
      if (!Absent(effect_node) &&
          !ReadEnum(effect_node, Join(tp, "effect"),
                    {"NoSchedule", "PreferNoSchedule", "NoExecute"}, &effect)) {
        return false;
      }
      if (!key.empty() && !IsQualifiedName(key)) {
        return Fail(Child(t, "key"), Join(tp, "key"), Quote(key) + " is not a valid taint key");
      }
      if (key.empty() && op != "Exists") {
        return Fail(t, Join(tp, "operator"),
                    "must be Exists when key is empty (which matches every taint)");
      }
      if (op == "Exists" && !value.empty()) {
        return Fail(Child(t, "value"), Join(tp, "value"), "must be empty when operator is Exists");
      }
      const YAML::Node seconds = Child(t, "tolerationSeconds");
      if (!Absent(seconds)) {
        int64_t ignored = 0;  // eviction timing is the kubelet's business, not admission's
        if (!ReadInt(seconds, Join(tp, "tolerationSeconds"), std::numeric_limits<int64_t>::min(),
                     std::numeric_limits<int64_t>::max(), &ignored)) {
          return false;
        }
        if (effect != "NoExecute") {
          return Fail(seconds, Join(tp, "tolerationSeconds"), "needs effect NoExecute");
        }
      }
      auto b = list[static_cast<unsigned>(i)];
      b.setKey(T(key));
      b.setOperator(T(op));
      b.setValue(T(value));
      b.setEffect(T(effect));
    }
    return true;
  }

  // matchExpressions of a label selector (namespaceSelector) or a nodeSelectorTerm.
  // `init(n)` initializes the destination list of n requirements.
  template <typename InitList>
  bool ParseRequirements(const YAML::Node& n, const std::string& path, bool node_selector,
                         InitList init) {
    if (!ExpectSequence(n, path, kListItemsMax)) return false;
    auto list = init(static_cast<unsigned>(n.size()));
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node req = n[i];
      const std::string rp = Index(path, i);
      if (!ExpectMap(req, rp)) return false;
      std::string key, op;
      if (!ReqString(req, "key", rp, &key, "the label key")) return false;
      if (!IsQualifiedName(key)) {
        return Fail(Child(req, "key"), Join(rp, "key"), Quote(key) + " is not a valid label key");
      }
      const YAML::Node op_node = Child(req, "operator");
      if (Absent(op_node)) return Fail(req, Join(rp, "operator"), "required");
      if (node_selector) {
        if (!ReadEnum(op_node, Join(rp, "operator"),
                      {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}, &op)) {
          return false;
        }
      } else if (!ReadEnum(op_node, Join(rp, "operator"), {"In", "NotIn", "Exists", "DoesNotExist"},
                           &op)) {
        return false;
      }
      std::vector<std::string> values;
      const YAML::Node values_node = Child(req, "values");
      if (!Absent(values_node) &&
          !ReadStringList(values_node, Join(rp, "values"), kListItemsMax, &values)) {
        return false;
      }
      if ((op == "In" || op == "NotIn") && values.empty()) {
        return Fail(req, Join(rp, "values"), "must not be empty when operator is " + op);
      }
      if ((op == "Exists" || op == "DoesNotExist") && !values.empty()) {
        return Fail(values_node, Join(rp, "values"), "must be empty when operator is " + op);
      }
      if (op == "Gt" || op == "Lt") {
        if (values.size() != 1 || !ParseDecimal(values[0], std::numeric_limits<int64_t>::min(),
                                                std::numeric_limits<int64_t>::max())
                                       .ok()) {
          return Fail(req, Join(rp, "values"),
                      "must be exactly one integer when operator is " + op);
        }
      }
      auto b = list[static_cast<unsigned>(i)];
      b.setKey(T(key));
      b.setOperator(T(op));
      auto values_builder = b.initValues(static_cast<unsigned>(values.size()));
      for (size_t v = 0; v < values.size(); ++v)
        values_builder.set(static_cast<unsigned>(v), T(values[v]));
    }
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Definitions.

  bool ParseResourceFlavor(const YAML::Node& obj, const std::string& p) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
    const YAML::Node spec = Child(obj, "spec");
    if (!CheckSpec(spec, p)) return false;
    const std::string sp = Join(p, "spec");
    capnp::MallocMessageBuilder message;
    auto def = message.initRoot<schema::Event>().getBody().initFlavorDefined();
    def.setName(T(meta.name));

    std::map<std::string, std::string> node_labels;
    const YAML::Node labels = Child(spec, "nodeLabels");
    if (!Absent(labels) && !ReadStringMap(labels, Join(sp, "nodeLabels"), kFlavorNodeLabelsMax,
                                          KeyRule::kLabel, &node_labels)) {
      return false;
    }
    SetLabels(def.initNodeLabels(static_cast<unsigned>(node_labels.size())), node_labels);

    const YAML::Node taints = Child(spec, "nodeTaints");
    if (!Absent(taints)) {
      const std::string tp = Join(sp, "nodeTaints");
      if (!ExpectSequence(taints, tp, kFlavorTaintsMax)) return false;
      auto list = def.initNodeTaints(static_cast<unsigned>(taints.size()));
      for (size_t i = 0; i < taints.size(); ++i) {
        const YAML::Node taint = taints[i];
        const std::string tpi = Index(tp, i);
        if (!ExpectMap(taint, tpi)) return false;
        std::string key, value, effect;
        if (!ReqString(taint, "key", tpi, &key, "the taint's key")) return false;
        if (!IsQualifiedName(key)) {
          return Fail(Child(taint, "key"), Join(tpi, "key"),
                      Quote(key) + " is not a valid taint key");
        }
        if (!OptString(taint, "value", tpi, &value)) return false;
        const YAML::Node effect_node = Child(taint, "effect");
        if (Absent(effect_node)) return Fail(taint, Join(tpi, "effect"), "required");
        if (!ReadEnum(effect_node, Join(tpi, "effect"),
                      {"NoSchedule", "PreferNoSchedule", "NoExecute"}, &effect)) {
          return false;
        }
        auto b = list[static_cast<unsigned>(i)];
        b.setKey(T(key));
        b.setValue(T(value));
        b.setEffect(T(effect));
      }
    }

    const YAML::Node tolerations = Child(spec, "tolerations");
    if (!Absent(tolerations)) {
      auto init = [&def](unsigned n) { return def.initTolerations(n); };
      if (!ParseTolerations(tolerations, Join(sp, "tolerations"), kFlavorTolerationsMax, init)) {
        return false;
      }
    }

    std::string topology;
    if (!OptString(spec, "topologyName", sp, &topology)) return false;
    if (!topology.empty()) {
      if (!CheckSubdomain(Child(spec, "topologyName"), Join(sp, "topologyName"), topology)) {
        return false;
      }
      if (node_labels.empty()) {
        return Fail(Child(spec, "topologyName"), Join(sp, "topologyName"),
                    "needs at least one nodeLabel (Kueue: a topology flavor selects its nodes)");
      }
    }
    def.setTopologyName(T(topology));
    return Emit(message, obj, p, "ResourceFlavor", kind_, "", meta.name);
  }

  bool ParseCohort(const YAML::Node& obj, const std::string& p, bool v1beta2) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
    const YAML::Node spec = Child(obj, "spec");
    if (!CheckSpec(spec, p)) return false;
    const std::string sp = Join(p, "spec");
    capnp::MallocMessageBuilder message;
    auto def = message.initRoot<schema::Event>().getBody().initCohortDefined();
    def.setName(T(meta.name));

    // v1beta2 spells it parentName; v1beta1 said `parent` in early releases, parentName later.
    std::string parent, legacy_parent;
    if (!OptString(spec, "parentName", sp, &parent)) return false;
    const YAML::Node legacy = Child(spec, "parent");
    if (!Absent(legacy)) {
      if (v1beta2) {
        return Fail(legacy, Join(sp, "parent"),
                    "'parent' is the early v1beta1 spelling; in kueue.x-k8s.io/v1beta2 write "
                    "spec.parentName");
      }
      if (!ReadString(legacy, Join(sp, "parent"), &legacy_parent)) return false;
      if (!parent.empty() && parent != legacy_parent) {
        return Fail(legacy, Join(sp, "parent"), "conflicts with spec.parentName " + Quote(parent));
      }
      parent = legacy_parent;
    }
    const YAML::Node parent_node = Absent(legacy) ? Child(spec, "parentName") : legacy;
    if (!parent.empty() && !CheckSubdomain(parent_node, Join(sp, "parentName"), parent)) {
      return false;
    }
    if (parent == meta.name) {
      return Fail(parent_node, Join(sp, "parentName"), "a Cohort cannot be its own parent");
    }
    def.setParentName(T(parent));
    if (!ParseResourceGroups(spec, sp, !parent.empty(), "a parent (spec.parentName)", def)) {
      return false;
    }
    if (!ParseFairSharing(spec, sp, def)) return false;
    return Emit(message, obj, p, "Cohort", kind_, "", meta.name);
  }

  bool ParseClusterQueue(const YAML::Node& obj, const std::string& p, bool v1beta2) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
    const YAML::Node spec = Child(obj, "spec");
    if (!CheckSpec(spec, p)) return false;
    const std::string sp = Join(p, "spec");
    capnp::MallocMessageBuilder message;
    auto def = message.initRoot<schema::Event>().getBody().initClusterQueueDefined();
    def.setName(T(meta.name));

    // v1beta1 spec.cohort became v1beta2 spec.cohortName (Kueue's conversion maps one to the
    // other). The wrong spelling would be dropped by Kueue as unknown, silently leaving the
    // queue outside its cohort; refuse it instead.
    const std::string_view cohort_key = v1beta2 ? "cohortName" : "cohort";
    const std::string_view other_key = v1beta2 ? "cohort" : "cohortName";
    if (!Absent(Child(spec, other_key))) {
      return Fail(Child(spec, other_key), Join(sp, other_key),
                  Quote(other_key) + " is the " + (v1beta2 ? "v1beta1" : "v1beta2") +
                      " spelling; in " + std::string(v1beta2 ? kApiV1beta2 : kApiV1beta1) +
                      " write spec." + std::string(cohort_key));
    }
    std::string cohort;
    if (!OptString(spec, cohort_key, sp, &cohort)) return false;
    if (!cohort.empty() && !CheckSubdomain(Child(spec, cohort_key), Join(sp, cohort_key), cohort)) {
      return false;
    }
    def.setCohortName(T(cohort));
    if (!ParseResourceGroups(spec, sp, !cohort.empty(),
                             "a cohort (spec." + std::string(cohort_key) + ")", def)) {
      return false;
    }

    const YAML::Node strategy = Child(spec, "queueingStrategy");
    if (!Absent(strategy)) {
      std::string s;
      if (!ReadEnum(strategy, Join(sp, "queueingStrategy"), {"StrictFIFO", "BestEffortFIFO"}, &s)) {
        return false;
      }
      def.setQueueingStrategy(s == "StrictFIFO" ? schema::QueueingStrategy::STRICT_FIFO
                                                : schema::QueueingStrategy::BEST_EFFORT_FIFO);
    }

    // Absent namespaceSelector: Kueue (v1beta1 and v1beta2 alike, "Defaults to null which is a
    // nothing selector") admits from no namespace. `{}` admits from every namespace.
    const YAML::Node selector = Child(spec, "namespaceSelector");
    if (!Absent(selector) &&
        !ParseLabelSelector(selector, Join(sp, "namespaceSelector"), def.initNamespaceSelector())) {
      return false;
    }

    schema::StopPolicy stop = schema::StopPolicy::NONE;
    if (!ParseStopPolicy(spec, sp, &stop)) return false;
    def.setStopPolicy(stop);
    if (!ParsePreemption(spec, sp, def.initPreemption())) return false;
    if (!ParseFlavorFungibility(spec, sp, v1beta2, def.initFlavorFungibility())) return false;
    if (!ParseAdmissionChecks(spec, sp, def)) return false;
    if (!ParseFairSharing(spec, sp, def)) return false;

    int64_t max_wait_ns = 0;
    if (!ReadDurationAnnotation(meta.annotations, kMaxWaitAnnotation, meta.node, p, &max_wait_ns)) {
      return false;
    }
    def.setMaxWaitNs(max_wait_ns);
    return Emit(message, obj, p, "ClusterQueue", kind_, "", meta.name);
  }

  bool ParseLabelSelector(const YAML::Node& n, const std::string& path,
                          schema::LabelSelector::Builder b) {
    if (!ExpectMap(n, path)) return false;
    std::map<std::string, std::string> match_labels;
    const YAML::Node labels = Child(n, "matchLabels");
    if (!Absent(labels) && !ReadStringMap(labels, Join(path, "matchLabels"), kMapEntriesMax,
                                          KeyRule::kLabel, &match_labels)) {
      return false;
    }
    SetLabels(b.initMatchLabels(static_cast<unsigned>(match_labels.size())), match_labels);
    size_t expressions = 0;
    const YAML::Node exprs = Child(n, "matchExpressions");
    if (!Absent(exprs)) {
      auto init = [&b](unsigned count) { return b.initMatchExpressions(count); };
      if (!ParseRequirements(exprs, Join(path, "matchExpressions"), false, init)) return false;
      expressions = exprs.size();
    }
    // A selector with no requirements selects everything (Kubernetes' LabelSelectorAsSelector).
    b.setMatchesAll(match_labels.empty() && expressions == 0);
    return true;
  }

  bool ParsePreemption(const YAML::Node& spec, const std::string& sp,
                       schema::PreemptionPolicy::Builder b) {
    const YAML::Node n = Child(spec, "preemption");
    if (Absent(n)) return true;  // Kueue's defaults: Never everywhere, the enum zeros
    const std::string pp = Join(sp, "preemption");
    if (!ExpectMap(n, pp)) return false;
    std::string within = "Never", reclaim = "Never", borrow = "Never";
    const YAML::Node within_node = Child(n, "withinClusterQueue");
    if (!Absent(within_node) &&
        !ReadEnum(within_node, Join(pp, "withinClusterQueue"),
                  {"Never", "LowerPriority", "LowerOrNewerEqualPriority"}, &within)) {
      return false;
    }
    const YAML::Node reclaim_node = Child(n, "reclaimWithinCohort");
    if (!Absent(reclaim_node) && !ReadEnum(reclaim_node, Join(pp, "reclaimWithinCohort"),
                                           {"Never", "LowerPriority", "Any"}, &reclaim)) {
      return false;
    }
    const YAML::Node borrow_node = Child(n, "borrowWithinCohort");
    if (!Absent(borrow_node)) {
      const std::string bp = Join(pp, "borrowWithinCohort");
      if (!ExpectMap(borrow_node, bp)) return false;
      const YAML::Node policy = Child(borrow_node, "policy");
      if (!Absent(policy) &&
          !ReadEnum(policy, Join(bp, "policy"), {"Never", "LowerPriority"}, &borrow)) {
        return false;
      }
      const YAML::Node threshold = Child(borrow_node, "maxPriorityThreshold");
      if (!Absent(threshold)) {
        int32_t v = 0;
        if (!ReadInt32(threshold, Join(bp, "maxPriorityThreshold"),
                       std::numeric_limits<int32_t>::min(), &v)) {
          return false;
        }
        b.setHasMaxPriorityThreshold(true);
        b.setMaxPriorityThreshold(v);
      }
      if (reclaim == "Never" && borrow != "Never") {
        return Fail(borrow_node, Join(bp, "policy"),
                    "must be Never when reclaimWithinCohort is Never (Kueue's rule)");
      }
    }
    b.setWithinClusterQueue(within == "LowerPriority"
                                ? schema::WithinClusterQueuePolicy::LOWER_PRIORITY
                            : within == "LowerOrNewerEqualPriority"
                                ? schema::WithinClusterQueuePolicy::LOWER_OR_NEWER_EQUAL_PRIORITY
                                : schema::WithinClusterQueuePolicy::NEVER);
    b.setReclaimWithinCohort(reclaim == "LowerPriority"
                                 ? schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY
                             : reclaim == "Any" ? schema::ReclaimWithinCohortPolicy::ANY
                                                : schema::ReclaimWithinCohortPolicy::NEVER);
    b.setBorrowWithinCohort(borrow == "LowerPriority"
                                ? schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY
                                : schema::ReclaimWithinCohortPolicy::NEVER);
    return true;
  }

  // v1beta1 says Borrow and Preempt where v1beta2 says MayStopSearch; both are accepted in
  // both versions, as they mean the same.
  bool ParseFlavorFungibility(const YAML::Node& spec, const std::string& sp, bool v1beta2,
                              schema::FlavorFungibility::Builder b) {
    const YAML::Node n = Child(spec, "flavorFungibility");
    if (Absent(n)) return true;
    const std::string fp = Join(sp, "flavorFungibility");
    if (!ExpectMap(n, fp)) return false;
    std::string when_borrow = "MayStopSearch", when_preempt = "TryNextFlavor";
    const YAML::Node borrow = Child(n, "whenCanBorrow");
    if (!Absent(borrow) && !ReadEnum(borrow, Join(fp, "whenCanBorrow"),
                                     {"Borrow", "MayStopSearch", "TryNextFlavor"}, &when_borrow)) {
      return false;
    }
    const YAML::Node preempt = Child(n, "whenCanPreempt");
    if (!Absent(preempt) &&
        !ReadEnum(preempt, Join(fp, "whenCanPreempt"),
                  {"Preempt", "MayStopSearch", "TryNextFlavor"}, &when_preempt)) {
      return false;
    }
    b.setWhenCanBorrow(when_borrow == "TryNextFlavor" ? schema::FungibilityAction::TRY_NEXT_FLAVOR
                                                      : schema::FungibilityAction::BORROW);
    b.setWhenCanPreempt(when_preempt == "TryNextFlavor" ? schema::FungibilityAction::TRY_NEXT_FLAVOR
                                                        : schema::FungibilityAction::PREEMPT);
    const YAML::Node preference = Child(n, "preference");
    if (!Absent(preference)) {
      std::string s;
      if (!ReadEnum(preference, Join(fp, "preference"),
                    {"BorrowingOverPreemption", "PreemptionOverBorrowing"}, &s)) {
        return false;
      }
      if (v1beta2 && (when_borrow != "TryNextFlavor" || when_preempt != "TryNextFlavor")) {
        return Fail(preference, Join(fp, "preference"),
                    "can only be set when both whenCanBorrow and whenCanPreempt are "
                    "TryNextFlavor (Kueue's rule)");
      }
      b.setPreference(s == "PreemptionOverBorrowing"
                          ? schema::FungibilityPreference::PREEMPTION_OVER_BORROWING
                          : schema::FungibilityPreference::BORROWING_OVER_PREEMPTION);
    }
    return true;
  }

  bool ParseAdmissionChecks(const YAML::Node& spec, const std::string& sp,
                            schema::ClusterQueueDef::Builder def) {
    const YAML::Node checks = Child(spec, "admissionChecks");
    const YAML::Node strategy = Child(spec, "admissionChecksStrategy");
    if (!Absent(checks) && !Absent(strategy)) {
      return Fail(strategy, Join(sp, "admissionChecksStrategy"),
                  "either admissionChecks or admissionChecksStrategy can be set, not both");
    }
    if (!Absent(checks)) {
      const std::string cp = Join(sp, "admissionChecks");
      std::vector<std::string> names;
      if (!ReadStringList(checks, cp, kAdmissionChecksMax, &names)) return false;
      std::set<std::string> seen;
      for (size_t i = 0; i < names.size(); ++i) {
        if (!CheckSubdomain(checks[i], Index(cp, i), names[i])) return false;
        if (!seen.insert(names[i]).second) {
          return Fail(checks[i], Index(cp, i),
                      "admission check " + Quote(names[i]) + " is listed twice");
        }
      }
      auto list = def.initAdmissionChecks(static_cast<unsigned>(names.size()));
      for (size_t i = 0; i < names.size(); ++i) list.set(static_cast<unsigned>(i), T(names[i]));
    }
    if (!Absent(strategy)) {
      const std::string stp = Join(sp, "admissionChecksStrategy");
      if (!ExpectMap(strategy, stp)) return false;
      const YAML::Node rules = Child(strategy, "admissionChecks");
      const std::string rp = Join(stp, "admissionChecks");
      if (Absent(rules)) return Fail(strategy, rp, "required: at least one admission check");
      if (!ExpectSequence(rules, rp, kAdmissionChecksMax)) return false;
      if (rules.size() == 0) return Fail(rules, rp, "must list at least one admission check");
      auto list = def.initAdmissionChecksStrategy(static_cast<unsigned>(rules.size()));
      std::set<std::string> seen;
      for (size_t i = 0; i < rules.size(); ++i) {
        const YAML::Node rule = rules[i];
        const std::string rpi = Index(rp, i);
        if (!ExpectMap(rule, rpi)) return false;
        std::string name;
        if (!ReqString(rule, "name", rpi, &name, "the AdmissionCheck's name")) return false;
        if (!CheckSubdomain(Child(rule, "name"), Join(rpi, "name"), name)) return false;
        if (!seen.insert(name).second) {
          return Fail(Child(rule, "name"), Join(rpi, "name"),
                      "admission check " + Quote(name) + " is listed twice");
        }
        std::vector<std::string> on_flavors;
        const YAML::Node flavors = Child(rule, "onFlavors");
        if (!Absent(flavors)) {
          if (!ReadStringList(flavors, Join(rpi, "onFlavors"), kOnFlavorsMax, &on_flavors)) {
            return false;
          }
          for (size_t f = 0; f < on_flavors.size(); ++f) {
            if (!CheckSubdomain(flavors[f], Index(Join(rpi, "onFlavors"), f), on_flavors[f])) {
              return false;
            }
          }
        }
        auto b = list[static_cast<unsigned>(i)];
        b.setName(T(name));
        auto flavors_builder = b.initOnFlavors(static_cast<unsigned>(on_flavors.size()));
        for (size_t f = 0; f < on_flavors.size(); ++f) {
          flavors_builder.set(static_cast<unsigned>(f), T(on_flavors[f]));
        }
      }
    }
    return true;
  }

  bool ParseLocalQueue(const YAML::Node& obj, const std::string& p) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kNamespaced, false, &meta)) return false;
    const YAML::Node spec = Child(obj, "spec");
    if (!CheckSpec(spec, p)) return false;
    const std::string sp = Join(p, "spec");
    capnp::MallocMessageBuilder message;
    auto def = message.initRoot<schema::Event>().getBody().initLocalQueueDefined();
    def.setNamespace(T(meta.ns));
    def.setName(T(meta.name));
    std::string cq;
    if (Absent(spec)) {
      return Fail(obj, Join(sp, "clusterQueue"), "required: the ClusterQueue behind this queue");
    }
    if (!ReqString(spec, "clusterQueue", sp, &cq, "the ClusterQueue behind this queue")) {
      return false;
    }
    if (!CheckSubdomain(Child(spec, "clusterQueue"), Join(sp, "clusterQueue"), cq)) return false;
    def.setClusterQueue(T(cq));
    schema::StopPolicy stop = schema::StopPolicy::NONE;
    if (!ParseStopPolicy(spec, sp, &stop)) return false;
    def.setStopPolicy(stop);
    if (!ParseFairSharing(spec, sp, def)) return false;
    return Emit(message, obj, p, "LocalQueue", kind_, meta.ns, meta.name);
  }

  bool ParseAdmissionCheck(const YAML::Node& obj, const std::string& p) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
    const YAML::Node spec = Child(obj, "spec");
    if (!CheckSpec(spec, p)) return false;
    const std::string sp = Join(p, "spec");
    capnp::MallocMessageBuilder message;
    auto def = message.initRoot<schema::Event>().getBody().initAdmissionCheckDefined();
    def.setName(T(meta.name));
    std::string controller;
    if (Absent(spec)) return Fail(obj, Join(sp, "controllerName"), "required: the check's owner");
    if (!ReqString(spec, "controllerName", sp, &controller,
                   "the controller that owns the check (the only reporter allowed)")) {
      return false;
    }
    if (controller.size() > kNameBytesMax) {
      return Fail(Child(spec, "controllerName"), Join(sp, "controllerName"),
                  "longer than " + std::to_string(kNameBytesMax) + " characters");
    }
    def.setControllerName(T(controller));

    const std::string ap = Join(p, "metadata.annotations");
    int64_t ttl = 0, base = 0, max = 0;
    if (!ReadDurationAnnotation(meta.annotations, kPendingTtlAnnotation, meta.node, p, &ttl) ||
        !ReadDurationAnnotation(meta.annotations, kBackoffBaseAnnotation, meta.node, p, &base) ||
        !ReadDurationAnnotation(meta.annotations, kBackoffMaxAnnotation, meta.node, p, &max)) {
      return false;
    }
    if (base != 0 && max != 0 && base > max) {
      return Fail(MetaEntry(meta, "annotations", kBackoffBaseAnnotation),
                  MapKey(ap, kBackoffBaseAnnotation), "backoff-base must not exceed backoff-max");
    }
    def.setPendingTtlNs(ttl);
    def.setBackoffBaseNs(base);
    def.setBackoffMaxNs(max);
    if (auto it = meta.annotations.find(std::string(kOnTimeoutAnnotation));
        it != meta.annotations.end()) {
      if (it->second != "Retry" && it->second != "Reject") {
        return Fail(MetaEntry(meta, "annotations", kOnTimeoutAnnotation),
                    MapKey(ap, kOnTimeoutAnnotation),
                    Quote(it->second) + " is not one of Retry, Reject");
      }
      def.setOnTimeout(it->second == "Reject" ? schema::OnTimeout::REJECT
                                              : schema::OnTimeout::RETRY);
    }
    if (auto it = meta.annotations.find(std::string(kRetryLimitAnnotation));
        it != meta.annotations.end()) {
      Result<int64_t> limit = ParseDecimal(it->second, 0, std::numeric_limits<uint32_t>::max());
      if (!limit.ok()) {
        return Fail(MetaEntry(meta, "annotations", kRetryLimitAnnotation),
                    MapKey(ap, kRetryLimitAnnotation), limit.status().message());
      }
      def.setRetryLimit(static_cast<uint32_t>(*limit));
    }
    return Emit(message, obj, p, "AdmissionCheck", kind_, "", meta.name);
  }

  bool ParsePriorityClass(const YAML::Node& obj, const std::string& p) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
    capnp::MallocMessageBuilder message;
    auto def = message.initRoot<schema::Event>().getBody().initPriorityClassDefined();
    def.setName(T(meta.name));
    const YAML::Node value = Child(obj, "value");
    if (Absent(value)) return Fail(obj, Join(p, "value"), "required: the priority of the class");
    int32_t v = 0;
    if (!ReadInt32(value, Join(p, "value"), std::numeric_limits<int32_t>::min(), &v)) return false;
    def.setValue(v);
    std::string description;
    if (!OptString(obj, "description", p, &description)) return false;
    def.setDescription(T(description));
    return Emit(message, obj, p, "WorkloadPriorityClass", kind_, "", meta.name);
  }

  // ------------------------------------------------------------------------------------------
  // Workloads.

  // The requests of one container: requests, and limits where a request is missing (Kubernetes
  // defaults a missing request to the limit; Kueue counts it so).
  bool ContainerRequests(const YAML::Node& container, const std::string& cp,
                         std::map<std::string, int64_t>* out) {
    if (!ExpectMap(container, cp)) return false;
    const YAML::Node resources = Child(container, "resources");
    if (Absent(resources)) return true;
    const std::string rp = Join(cp, "resources");
    if (!ExpectMap(resources, rp)) return false;
    const YAML::Node requests = Child(resources, "requests");
    if (!Absent(requests) && !ReadResourceMap(requests, Join(rp, "requests"), out)) return false;
    const YAML::Node limits = Child(resources, "limits");
    if (!Absent(limits)) {
      std::map<std::string, int64_t> limit_values;
      if (!ReadResourceMap(limits, Join(rp, "limits"), &limit_values)) return false;
      for (const auto& [name, milli] : limit_values) out->emplace(name, milli);  // keeps requests
    }
    return true;
  }

  bool AddInto(std::map<std::string, int64_t>* total, const std::map<std::string, int64_t>& add,
               const YAML::Node& at, const std::string& path) {
    for (const auto& [name, milli] : add) {
      int64_t& slot = (*total)[name];
      if (__builtin_add_overflow(slot, milli, &slot)) {
        return Fail(at, path,
                    "the sum of " + Quote(name) + " requests overflows int64 milli-units");
      }
    }
    return true;
  }

  static void MaxInto(std::map<std::string, int64_t>* total,
                      const std::map<std::string, int64_t>& other) {
    for (const auto& [name, milli] : other) {
      int64_t& slot = (*total)[name];
      slot = std::max(slot, milli);
    }
  }

  // A pod template's spec into a PodSet: per-pod requests by Kubernetes' effective request
  // rules, nodeSelector, tolerations and the required node affinity.
  //   requests = max(sum(containers) + sum(sidecars), max over init containers of (its
  //              requests + the sidecars started before it)) + overhead
  // where sidecars are init containers with restartPolicy Always.
  bool ParsePodSpec(const YAML::Node& spec, const std::string& sp, int64_t count,
                    schema::PodSet::Builder ps, std::string* priority_class_name) {
    if (!ExpectMap(spec, sp)) return false;
    const YAML::Node containers = Child(spec, "containers");
    const std::string cp = Join(sp, "containers");
    if (Absent(containers)) return Fail(spec, cp, "required: a pod has at least one container");
    if (!ExpectSequence(containers, cp, kContainersMax)) return false;
    if (containers.size() == 0) return Fail(containers, cp, "must list at least one container");
    std::map<std::string, int64_t> total;
    for (size_t i = 0; i < containers.size(); ++i) {
      std::map<std::string, int64_t> requests;
      if (!ContainerRequests(containers[i], Index(cp, i), &requests)) return false;
      if (!AddInto(&total, requests, containers[i], Index(cp, i))) return false;
    }
    const YAML::Node init_containers = Child(spec, "initContainers");
    if (!Absent(init_containers)) {
      const std::string ip = Join(sp, "initContainers");
      if (!ExpectSequence(init_containers, ip, kContainersMax)) return false;
      std::map<std::string, int64_t> sidecars;
      std::map<std::string, int64_t> init_max;
      for (size_t i = 0; i < init_containers.size(); ++i) {
        const YAML::Node c = init_containers[i];
        const std::string cpi = Index(ip, i);
        std::map<std::string, int64_t> requests;
        if (!ContainerRequests(c, cpi, &requests)) return false;
        std::string restart_policy;
        if (!OptString(c, "restartPolicy", cpi, &restart_policy)) return false;
        if (restart_policy == "Always") {
          if (!AddInto(&total, requests, c, cpi) || !AddInto(&sidecars, requests, c, cpi)) {
            return false;
          }
          MaxInto(&init_max, sidecars);
        } else {
          if (!AddInto(&requests, sidecars, c, cpi)) return false;
          MaxInto(&init_max, requests);
        }
      }
      MaxInto(&total, init_max);
    }
    const YAML::Node overhead = Child(spec, "overhead");
    if (!Absent(overhead)) {
      std::map<std::string, int64_t> amounts;
      if (!ReadResourceMap(overhead, Join(sp, "overhead"), &amounts)) return false;
      if (!AddInto(&total, amounts, overhead, Join(sp, "overhead"))) return false;
    }
    for (const auto& [name, milli] : total) {
      int64_t product = 0;
      if (__builtin_mul_overflow(milli, count, &product)) {
        return Fail(spec, sp,
                    Quote(name) + " requests times the pod count " + std::to_string(count) +
                        " overflow int64 milli-units");
      }
    }
    SetResources(ps.initRequests(static_cast<unsigned>(total.size())), total);

    std::map<std::string, std::string> node_selector;
    const YAML::Node selector = Child(spec, "nodeSelector");
    if (!Absent(selector) && !ReadStringMap(selector, Join(sp, "nodeSelector"), kMapEntriesMax,
                                            KeyRule::kLabel, &node_selector)) {
      return false;
    }
    SetLabels(ps.initNodeSelector(static_cast<unsigned>(node_selector.size())), node_selector);

    const YAML::Node tolerations = Child(spec, "tolerations");
    if (!Absent(tolerations)) {
      auto init = [&ps](unsigned n) { return ps.initTolerations(n); };
      if (!ParseTolerations(tolerations, Join(sp, "tolerations"), kListItemsMax, init)) {
        return false;
      }
    }

    const YAML::Node affinity = Child(spec, "affinity");
    if (!Absent(affinity)) {
      const std::string ap = Join(sp, "affinity");
      if (!ExpectMap(affinity, ap)) return false;
      const YAML::Node node_affinity = Child(affinity, "nodeAffinity");
      const std::string np = Join(ap, "nodeAffinity");
      if (!Absent(node_affinity) && !ExpectMap(node_affinity, np)) return false;
      const YAML::Node required =
          Child(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution");
      const std::string rp = Join(np, "requiredDuringSchedulingIgnoredDuringExecution");
      if (!Absent(required)) {
        if (!ExpectMap(required, rp)) return false;
        const YAML::Node terms = Child(required, "nodeSelectorTerms");
        const std::string tp = Join(rp, "nodeSelectorTerms");
        if (!Absent(terms)) {
          if (!ExpectSequence(terms, tp, kListItemsMax)) return false;
          // Several terms are ORed; PodSet.requiredAffinity holds one ANDed term, so taking
          // only the first would silently narrow where the pods may go.
          if (terms.size() > 1) {
            return Fail(terms, tp,
                        "has " + std::to_string(terms.size()) +
                            " terms; only one nodeSelectorTerm (ORed terms are not "
                            "supported) can be admitted");
          }
          if (terms.size() == 1) {
            const YAML::Node term = terms[0];
            if (!ExpectMap(term, Index(tp, 0))) return false;
            const YAML::Node exprs = Child(term, "matchExpressions");
            if (!Absent(exprs)) {
              auto init = [&ps](unsigned n) { return ps.initRequiredAffinity(n); };
              if (!ParseRequirements(exprs, Join(Index(tp, 0), "matchExpressions"), true, init)) {
                return false;
              }
            }
          }
        }
      }
    }
    return OptString(spec, "priorityClassName", sp, priority_class_name);
  }

  // The workload's uid: metadata.uid when given, else derived from the seed, namespace and name.
  std::string DeriveUid(const std::string& given, std::string_view ns,
                        std::string_view name) const {
    if (!given.empty()) return given;
    // From the name alone: a name made from generateName already carries the seed, and a
    // fixed name is its submission's idempotency key, so resubmitting the same file is the
    // same input (a no-op), not the same key with another uid.
    return UuidFromDigest(Sha256Parts({"uid", ns, name}));
  }

  // expectedRuntime and maxExecution from our annotations (and Kueue's own field or label).
  bool ParseRuntimeAnnotations(const Meta& meta, const std::string& p,
                               int64_t kueue_max_execution_ns, const std::string& kueue_field,
                               schema::Workload::Builder w) {
    int64_t expected = 0, max_execution = 0;
    if (!ReadDurationAnnotation(meta.annotations, kExpectedRuntimeAnnotation, meta.node, p,
                                &expected) ||
        !ReadDurationAnnotation(meta.annotations, kMaxExecutionAnnotation, meta.node, p,
                                &max_execution)) {
      return false;
    }
    if (max_execution != 0 && kueue_max_execution_ns != 0 &&
        max_execution != kueue_max_execution_ns) {
      return Fail(MetaEntry(meta, "annotations", kMaxExecutionAnnotation),
                  MapKey(Join(p, "metadata.annotations"), kMaxExecutionAnnotation),
                  "conflicts with " + kueue_field);
    }
    w.setExpectedRuntimeNs(expected);
    w.setMaxExecutionNs(max_execution != 0 ? max_execution : kueue_max_execution_ns);
    return true;
  }

  bool ParseWorkload(const YAML::Node& obj, const std::string& p, bool v1beta2, bool import) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kNamespaced, !import, &meta)) return false;
    const std::string sp = Join(p, "spec");
    const YAML::Node spec = Child(obj, "spec");
    if (Absent(spec)) return Fail(obj, sp, "required: a Workload has podSets");
    if (!ExpectMap(spec, sp)) return false;

    capnp::MallocMessageBuilder message;
    auto body = message.initRoot<schema::Event>().getBody();
    schema::Workload::Builder w = import ? body.initWorkloadImported().initWorkload()
                                         : body.initWorkloadSubmitted().initWorkload();
    w.setNamespace(T(meta.ns));
    w.setName(T(meta.name));
    w.setUid(T(DeriveUid(meta.uid, meta.ns, meta.name)));
    // Kubernetes sets creationTimestamp itself on create, ignoring the client's; a submission
    // that carried one could jump its queue. Only an import keeps the original time.
    w.setCreationTimestampNs(import ? meta.creation_ns : 0);
    SetLabels(w.initLabels(static_cast<unsigned>(meta.labels.size())), meta.labels);
    SetLabels(w.initAnnotations(static_cast<unsigned>(meta.annotations.size())), meta.annotations);

    std::string queue;
    if (!ReqString(spec, "queueName", sp, &queue, "the LocalQueue to queue in")) return false;
    if (!CheckSubdomain(Child(spec, "queueName"), Join(sp, "queueName"), queue)) return false;
    w.setQueueName(T(queue));

    const YAML::Node priority = Child(spec, "priority");
    if (!Absent(priority)) {
      int32_t v = 0;
      if (!ReadInt32(priority, Join(sp, "priority"), std::numeric_limits<int32_t>::min(), &v)) {
        return false;
      }
      w.setHasPriority(true);
      w.setPriority(v);
    }
    if (!ParseWorkloadPriorityClass(spec, sp, v1beta2, w)) return false;

    const YAML::Node active = Child(spec, "active");
    if (!Absent(active)) {
      bool v = true;
      if (!ReadBool(active, Join(sp, "active"), &v)) return false;
      w.setActive(v);
    }
    int64_t kueue_max_ns = 0;
    const YAML::Node max_seconds = Child(spec, "maximumExecutionTimeSeconds");
    if (!Absent(max_seconds)) {
      int32_t v = 0;
      if (!ReadInt32(max_seconds, Join(sp, "maximumExecutionTimeSeconds"), 1, &v)) return false;
      kueue_max_ns = int64_t{v} * kNsPerSecond;
    }
    if (!ParseRuntimeAnnotations(meta, p, kueue_max_ns, "spec.maximumExecutionTimeSeconds", w)) {
      return false;
    }

    const YAML::Node pod_sets = Child(spec, "podSets");
    const std::string pp = Join(sp, "podSets");
    if (Absent(pod_sets)) return Fail(spec, pp, "required: at least one podSet");
    if (!ExpectSequence(pod_sets, pp, kPodSetsMax)) return false;
    if (pod_sets.size() == 0) return Fail(pod_sets, pp, "must list at least one podSet");
    auto list = w.initPodSets(static_cast<unsigned>(pod_sets.size()));
    std::map<std::string, int32_t> counts;  // podSet name -> count, for the admission
    size_t with_min_count = 0;
    for (size_t i = 0; i < pod_sets.size(); ++i) {
      const YAML::Node ps = pod_sets[i];
      const std::string psp = Index(pp, i);
      if (!ExpectMap(ps, psp)) return false;
      std::string name = "main";  // Kueue's default podSet name
      if (!OptString(ps, "name", psp, &name)) return false;
      if (!IsDnsLabel(name)) {
        return Fail(Child(ps, "name"), Join(psp, "name"),
                    Quote(name) + " is not a valid podSet name: " + kLabelRule);
      }
      int32_t count = 1;
      const YAML::Node count_node = Child(ps, "count");
      if (!Absent(count_node) && !ReadInt32(count_node, Join(psp, "count"), 0, &count)) {
        return false;
      }
      if (!counts.emplace(name, count).second) {
        return Fail(Child(ps, "name"), Join(psp, "name"),
                    "podSet " + Quote(name) + " appears twice");
      }
      auto b = list[static_cast<unsigned>(i)];
      b.setName(T(name));
      b.setCount(count);
      const YAML::Node min_node = Child(ps, "minCount");
      if (!Absent(min_node)) {
        int32_t min_count = 0;
        if (!ReadInt32(min_node, Join(psp, "minCount"), 1, &min_count)) return false;
        if (min_count > count) {
          return Fail(min_node, Join(psp, "minCount"),
                      "must not exceed count (" + std::to_string(count) + ")");
        }
        if (++with_min_count > 1) {
          return Fail(min_node, Join(psp, "minCount"),
                      "at most one podSet can use minCount (Kueue's rule)");
        }
        b.setMinCount(min_count);
      }
      const YAML::Node tmpl = Child(ps, "template");
      const std::string tp = Join(psp, "template");
      if (Absent(tmpl)) return Fail(ps, tp, "required: the pod template");
      if (!ExpectMap(tmpl, tp)) return false;
      const YAML::Node pod_spec = Child(tmpl, "spec");
      if (Absent(pod_spec)) return Fail(tmpl, Join(tp, "spec"), "required: the pod spec");
      std::string ignored_priority_class;  // a Workload names its class in spec
      if (!ParsePodSpec(pod_spec, Join(tp, "spec"), count, b, &ignored_priority_class)) {
        return false;
      }
    }

    if (import) {
      if (!ParseAdmission(obj, p, counts, body.getWorkloadImported().initAdmission())) return false;
    } else if (!Absent(Child(Child(obj, "status"), "admission"))) {
      // Submitting an admitted workload would queue it a second time while it runs.
      return Fail(Child(Child(obj, "status"), "admission"), Join(p, "status.admission"),
                  "the workload is already admitted: import it instead of submitting it");
    }
    return Emit(message, obj, p, "Workload", kind_, meta.ns, meta.name);
  }

  // v1beta1: priorityClassName + priorityClassSource; v1beta2: priorityClassRef{group,kind,name}.
  bool ParseWorkloadPriorityClass(const YAML::Node& spec, const std::string& sp, bool v1beta2,
                                  schema::Workload::Builder w) {
    std::string name, source;
    const YAML::Node ref = Child(spec, "priorityClassRef");
    if (v1beta2) {
      for (std::string_view old_key : {"priorityClassName", "priorityClassSource"}) {
        if (!Absent(Child(spec, old_key))) {
          return Fail(Child(spec, old_key), Join(sp, old_key),
                      Quote(old_key) +
                          " is the v1beta1 spelling; in kueue.x-k8s.io/v1beta2 write "
                          "spec.priorityClassRef {group, kind, name}");
        }
      }
      if (!Absent(ref)) {
        const std::string rp = Join(sp, "priorityClassRef");
        if (!ExpectMap(ref, rp)) return false;
        std::string group, kind;
        if (!ReqString(ref, "group", rp, &group, "kueue.x-k8s.io or scheduling.k8s.io") ||
            !ReqString(ref, "kind", rp, &kind, "WorkloadPriorityClass or PriorityClass") ||
            !ReqString(ref, "name", rp, &name, "the class's name")) {
          return false;
        }
        if (group == "kueue.x-k8s.io" && kind == "WorkloadPriorityClass") {
          source = kWorkloadPriorityClassSource;
        } else if (group == "scheduling.k8s.io" && kind == "PriorityClass") {
          source = kPodPriorityClassSource;
        } else {
          return Fail(ref, rp,
                      "group/kind " + Quote(group + "/" + kind) +
                          " is not kueue.x-k8s.io/WorkloadPriorityClass or "
                          "scheduling.k8s.io/PriorityClass");
        }
        if (!CheckSubdomain(Child(ref, "name"), Join(rp, "name"), name)) return false;
      }
    } else {
      if (!Absent(ref)) {
        return Fail(ref, Join(sp, "priorityClassRef"),
                    "'priorityClassRef' is the v1beta2 spelling; in kueue.x-k8s.io/v1beta1 write "
                    "spec.priorityClassName and spec.priorityClassSource");
      }
      if (!OptString(spec, "priorityClassName", sp, &name)) return false;
      const YAML::Node source_node = Child(spec, "priorityClassSource");
      if (!Absent(source_node) &&
          !ReadEnum(source_node, Join(sp, "priorityClassSource"),
                    {kWorkloadPriorityClassSource, kPodPriorityClassSource, ""}, &source)) {
        return false;
      }
      if (!name.empty() &&
          !CheckSubdomain(Child(spec, "priorityClassName"), Join(sp, "priorityClassName"), name)) {
        return false;
      }
    }
    w.setPriorityClassName(T(name));
    w.setPriorityClassSource(T(source));
    return true;
  }

  bool ParseAdmission(const YAML::Node& obj, const std::string& p,
                      const std::map<std::string, int32_t>& counts, schema::Admission::Builder a) {
    const std::string ap = Join(p, "status.admission");
    const YAML::Node status = Child(obj, "status");
    const YAML::Node admission = Child(status, "admission");
    if (!Absent(status) && !ExpectMap(status, Join(p, "status"))) return false;
    if (Absent(admission)) {
      return Fail(obj, ap,
                  "nothing to import: no status.admission (the workload is not admitted; "
                  "submit it instead)");
    }
    if (!ExpectMap(admission, ap)) return false;
    std::string cq;
    if (!ReqString(admission, "clusterQueue", ap, &cq,
                   "the ClusterQueue that admitted the workload")) {
      return false;
    }
    if (!CheckSubdomain(Child(admission, "clusterQueue"), Join(ap, "clusterQueue"), cq)) {
      return false;
    }
    a.setClusterQueue(T(cq));
    const YAML::Node assignments = Child(admission, "podSetAssignments");
    const std::string sp = Join(ap, "podSetAssignments");
    if (Absent(assignments)) return Fail(admission, sp, "required: one assignment per podSet");
    if (!ExpectSequence(assignments, sp, kPodSetsMax)) return false;
    auto list = a.initPodSetAssignments(static_cast<unsigned>(assignments.size()));
    std::set<std::string> seen;
    for (size_t i = 0; i < assignments.size(); ++i) {
      const YAML::Node as = assignments[i];
      const std::string asp = Index(sp, i);
      if (!ExpectMap(as, asp)) return false;
      std::string name = "main";
      if (!OptString(as, "name", asp, &name)) return false;
      const auto count_it = counts.find(name);
      if (count_it == counts.end()) {
        return Fail(Child(as, "name"), Join(asp, "name"),
                    "no podSet " + Quote(name) + " in spec.podSets");
      }
      if (!seen.insert(name).second) {
        return Fail(Child(as, "name"), Join(asp, "name"),
                    "podSet " + Quote(name) + " is assigned twice");
      }
      auto b = list[static_cast<unsigned>(i)];
      b.setName(T(name));
      std::map<std::string, std::string> flavors;
      const YAML::Node flavors_node = Child(as, "flavors");
      if (!Absent(flavors_node)) {
        if (!ReadStringMap(flavors_node, Join(asp, "flavors"), kMapEntriesMax, KeyRule::kResource,
                           &flavors)) {
          return false;
        }
        for (const auto& [resource, flavor] : flavors) {
          if (!CheckSubdomain(flavors_node[resource], MapKey(Join(asp, "flavors"), resource),
                              flavor)) {
            return false;
          }
        }
      }
      auto flavor_refs = b.initFlavors(static_cast<unsigned>(flavors.size()));
      unsigned f = 0;
      for (const auto& [resource, flavor] : flavors) {
        flavor_refs[f].setResource(T(resource));
        flavor_refs[f].setFlavor(T(flavor));
        ++f;
      }
      std::map<std::string, int64_t> usage;
      const YAML::Node usage_node = Child(as, "resourceUsage");
      if (!Absent(usage_node) && !ReadResourceMap(usage_node, Join(asp, "resourceUsage"), &usage)) {
        return false;
      }
      SetResources(b.initResourceUsage(static_cast<unsigned>(usage.size())), usage);
      int32_t count = count_it->second;  // Kueue: a missing count means the podSet's count
      const YAML::Node count_node = Child(as, "count");
      if (!Absent(count_node) && !ReadInt32(count_node, Join(asp, "count"), 0, &count)) {
        return false;
      }
      if (count > count_it->second) {
        return Fail(count_node, Join(asp, "count"),
                    "exceeds the podSet's count (" + std::to_string(count_it->second) + ")");
      }
      b.setCount(count);
    }
    if (seen.size() != counts.size()) {
      for (const auto& [name, count] : counts) {
        if (seen.count(name) == 0) {
          return Fail(assignments, sp, "podSet " + Quote(name) + " has no assignment");
        }
      }
    }
    return true;
  }

  // A batch/v1 Job becomes the Workload Kueue's job controller would create: one podSet "main"
  // of `parallelism` pods (fewer if completions is smaller), in the LocalQueue its
  // kueue.x-k8s.io/queue-name label names. Kueue names that Workload "job-<job name>-<5 hex of
  // the Job's uid>"; without a uid yet, this names it "job-<job name>", which is unique per
  // namespace just as the Job's name is.
  bool ParseJob(const YAML::Node& obj, const std::string& p) {
    Meta meta(obj);
    if (!ReadMeta(obj, p, Scope::kNamespaced, true, &meta)) return false;
    const std::string lp = Join(p, "metadata.labels");
    const auto queue_it = meta.labels.find(std::string(kQueueNameLabel));
    if (queue_it == meta.labels.end() || queue_it->second.empty()) {
      return Fail(MetaEntry(meta, "labels", kQueueNameLabel), MapKey(lp, kQueueNameLabel),
                  "not managed by Kueue: no kueue.x-k8s.io/queue-name label");
    }
    const std::string& queue = queue_it->second;
    if (!IsDnsSubdomain(queue)) {
      return Fail(MetaEntry(meta, "labels", kQueueNameLabel), MapKey(lp, kQueueNameLabel),
                  Quote(queue) + " is not a valid LocalQueue name: " + kSubdomainRule);
    }
    const std::string workload_name = "job-" + meta.name;
    if (workload_name.size() > kNameBytesMax) {
      return Fail(meta.node, Join(p, "metadata.name"),
                  "too long: the Workload name job-<name> must be at most " +
                      std::to_string(kNameBytesMax) + " characters");
    }
    const std::string sp = Join(p, "spec");
    const YAML::Node spec = Child(obj, "spec");
    if (Absent(spec)) return Fail(obj, sp, "required: a Job has a pod template");
    if (!ExpectMap(spec, sp)) return false;
    int32_t parallelism = 1;
    const YAML::Node parallelism_node = Child(spec, "parallelism");
    if (!Absent(parallelism_node) &&
        !ReadInt32(parallelism_node, Join(sp, "parallelism"), 0, &parallelism)) {
      return false;
    }
    int32_t count = parallelism;
    const YAML::Node completions_node = Child(spec, "completions");
    if (!Absent(completions_node)) {
      int32_t completions = 0;
      if (!ReadInt32(completions_node, Join(sp, "completions"), 0, &completions)) return false;
      count = std::min(count, completions);
    }

    capnp::MallocMessageBuilder message;
    auto w = message.initRoot<schema::Event>().getBody().initWorkloadSubmitted().initWorkload();
    w.setNamespace(T(meta.ns));
    w.setName(T(workload_name));
    // The Job's own uid is not the Workload's: derive one.
    w.setUid(T(DeriveUid("", meta.ns, workload_name)));
    w.setQueueName(T(queue));
    // creationTimestampNs stays 0: a submission is created at its intake time (as in
    // ParseWorkload).
    SetLabels(w.initLabels(static_cast<unsigned>(meta.labels.size())), meta.labels);
    SetLabels(w.initAnnotations(static_cast<unsigned>(meta.annotations.size())), meta.annotations);

    int64_t kueue_max_ns = 0;
    if (const auto it = meta.labels.find(std::string(kMaxExecTimeLabel)); it != meta.labels.end()) {
      Result<int64_t> seconds = ParseDecimal(it->second, 1, std::numeric_limits<int32_t>::max());
      if (!seconds.ok()) {
        return Fail(MetaEntry(meta, "labels", kMaxExecTimeLabel), MapKey(lp, kMaxExecTimeLabel),
                    seconds.status().message());
      }
      kueue_max_ns = *seconds * kNsPerSecond;
    }
    if (!ParseRuntimeAnnotations(meta, p, kueue_max_ns,
                                 "the kueue.x-k8s.io/max-exec-time-seconds label", w)) {
      return false;
    }

    auto ps = w.initPodSets(1)[0];
    ps.setName("main");
    ps.setCount(count);
    if (const auto it = meta.annotations.find(std::string(kJobMinParallelismAnnotation));
        it != meta.annotations.end()) {
      const std::string path =
          MapKey(Join(p, "metadata.annotations"), kJobMinParallelismAnnotation);
      Result<int64_t> min = ParseDecimal(it->second, 1, std::numeric_limits<int32_t>::max());
      const YAML::Node at = MetaEntry(meta, "annotations", kJobMinParallelismAnnotation);
      if (!min.ok()) return Fail(at, path, min.status().message());
      if (*min >= parallelism) {
        return Fail(at, path,
                    "must be less than spec.parallelism (" + std::to_string(parallelism) +
                        ") (Kueue's rule)");
      }
      if (*min > count) {
        return Fail(at, path,
                    "exceeds the pod count " + std::to_string(count) +
                        " (spec.completions is below spec.parallelism)");
      }
      ps.setMinCount(static_cast<int32_t>(*min));
    }
    const YAML::Node tmpl = Child(spec, "template");
    const std::string tp = Join(sp, "template");
    if (Absent(tmpl)) return Fail(spec, tp, "required: the pod template");
    if (!ExpectMap(tmpl, tp)) return false;
    const YAML::Node pod_spec = Child(tmpl, "spec");
    if (Absent(pod_spec)) return Fail(tmpl, Join(tp, "spec"), "required: the pod spec");
    std::string pod_priority_class;
    if (!ParsePodSpec(pod_spec, Join(tp, "spec"), count, ps, &pod_priority_class)) return false;

    // Kueue's precedence: the WorkloadPriorityClass label, else the pod's PriorityClass.
    if (const auto it = meta.labels.find(std::string(kPriorityClassLabel));
        it != meta.labels.end()) {
      if (!IsDnsSubdomain(it->second)) {
        return Fail(MetaEntry(meta, "labels", kPriorityClassLabel), MapKey(lp, kPriorityClassLabel),
                    Quote(it->second) + " is not a valid class name: " + kSubdomainRule);
      }
      w.setPriorityClassName(T(it->second));
      w.setPriorityClassSource(T(std::string(kWorkloadPriorityClassSource)));
    } else if (!pod_priority_class.empty()) {
      w.setPriorityClassName(T(pod_priority_class));
      w.setPriorityClassSource(T(std::string(kPodPriorityClassSource)));
    }
    return Emit(message, obj, p, "Workload", "Job", meta.ns, workload_name);
  }

  const Mode mode_;
  const SubmitContext* const ctx_;  // null in apply mode
  const RawDocument raw_;
  std::vector<ParsedObject>* const out_;
  std::string kind_;  // of the object being parsed, for error messages
  std::string name_;
  YamlError error_;
};

// Counts the documents of a YAML stream without building them.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { last_line_ = mark.line; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  int last_line() const { return last_line_; }

 private:
  int last_line_ = 0;
};

// yaml-cpp 0.7 (Debian 12's) never returns from LoadAll on some malformed input, e.g. a stray
// ',' (found by tests/fuzz/yaml_fuzz.cc; jbeder/yaml-cpp#1040, fixed upstream after 0.8.0 by
// #1318 and #1319): its parser keeps reporting an empty document without consuming a token,
// and LoadAll collects them until memory runs out. So each piece is first parsed by a handler
// that builds nothing, and refused once it reports more documents than the text could hold
// (every document but the last takes at least one byte). Returns the line (0-based) where the
// parser got stuck, or -1 when it reaches the end. Throws what the parser throws.
int StuckParserLine(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentCounter counter;
  const size_t documents_max = text.size() + 1;
  for (size_t documents = 0; parser.HandleNextDocument(counter);) {
    if (++documents > documents_max) return counter.last_line();
  }
  return -1;
}

Result<std::vector<ParsedObject>> ParseYaml(std::string_view text, Mode mode,
                                            const SubmitContext* ctx) {
  if (text.size() > kYamlBytesMax) {
    return Status(Code::kInvalidArgument, "the file is " + std::to_string(text.size()) +
                                              " bytes; at most " + std::to_string(kYamlBytesMax) +
                                              " are allowed");
  }
  std::vector<ParsedObject> out;
  size_t document_number = 0;
  for (const RawDocument& raw : SplitDocuments(text)) {
    std::vector<YAML::Node> nodes;
    try {
      const std::string raw_text(raw.text);
      if (const int stuck = StuckParserLine(raw_text); stuck >= 0) {
        DocumentParser parser(mode, ctx, document_number + 1, raw, &out);
        parser.FailAtLine(static_cast<size_t>(stuck),
                          "not valid YAML: the parser cannot get past this line");
        return Status(Code::kInvalidArgument, parser.error().ToString());
      }
      nodes = YAML::LoadAll(raw_text);
    } catch (const YAML::Exception& e) {
      DocumentParser parser(mode, ctx, document_number + 1, raw, &out);
      parser.FailAtLine(e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line),
                        "not valid YAML: " + e.msg);
      return Status(Code::kInvalidArgument, parser.error().ToString());
    }
    for (const YAML::Node& node : nodes) {
      if (node.IsNull()) continue;  // an empty document, e.g. after a trailing `---`
      ++document_number;
      DocumentParser parser(mode, ctx, document_number, raw, &out);
      bool ok = false;
      try {
        ok = parser.ParseObject(node, "", true);
      } catch (const YAML::Exception& e) {
        parser.FailAtLine(e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line),
                          "unreadable YAML: " + e.msg);
      }
      if (!ok) return Status(Code::kInvalidArgument, parser.error().ToString());
    }
  }
  return out;
}

}  // namespace

std::string YamlError::ToString() const {
  std::string where = "document " + std::to_string(document_number);
  std::string detail;
  if (!kind.empty()) detail = kind + (name.empty() ? "" : " " + name);
  if (line != 0) {
    detail += (detail.empty() ? "" : ", ") + std::string("line ") + std::to_string(line);
  }
  if (!detail.empty()) where += " (" + detail + ")";
  return where + ": " + (field_path.empty() ? "" : field_path + ": ") + reason;
}

Result<std::vector<ParsedObject>> ParseApplyYaml(std::string_view text) {
  return ParseYaml(text, Mode::kApply, nullptr);
}

Result<std::vector<ParsedObject>> ParseSubmitYaml(std::string_view text, const SubmitContext& ctx) {
  return ParseYaml(text, Mode::kSubmit, &ctx);
}

Result<std::vector<ParsedObject>> ParseImportYaml(std::string_view text, const SubmitContext& ctx) {
  return ParseYaml(text, Mode::kImport, &ctx);
}

}  // namespace admission::ops
