// Errors and typed reads: the first error of a document, strings, integers, booleans, enums,
// quantities, lists and maps, each refused with its path and line when it is of the wrong type.

#include <algorithm>
#include <limits>
#include <utility>

#include "ops/kueue_yaml/parser.h"
#include "schema/quantity.h"
#include "schema/time_format.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::Unhonoured(const YAML::Node& at, const std::string& path,
                                const std::string& reason) {
  if (options_ == nullptr || !options_->lenient) {
    return Fail(at, path, reason + "; nothing imported (--lenient imports without it)");
  }
  if (options_->warnings != nullptr) {
    options_->warnings->push_back(kind_ + " " + name_ + ": " + path + ": dropped: " + reason);
  }
  return true;
}

bool DocumentParser::Fail(const YAML::Node& at, const std::string& path, std::string reason) {
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
bool DocumentParser::ExpectMap(const YAML::Node& n, const std::string& path) {
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

bool DocumentParser::ExpectSequence(const YAML::Node& n, const std::string& path,
                                    size_t max_items) {
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
bool DocumentParser::ReadString(const YAML::Node& n, const std::string& path, std::string* out) {
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
bool DocumentParser::OptString(const YAML::Node& parent, std::string_view key, const std::string& p,
                               std::string* out) {
  const YAML::Node n = Child(parent, key);
  if (Absent(n)) return true;
  return ReadString(n, Join(p, key), out);
}

bool DocumentParser::ReqString(const YAML::Node& parent, std::string_view key, const std::string& p,
                               std::string* out, std::string_view what) {
  const YAML::Node n = Child(parent, key);
  if (Absent(n)) return Fail(parent, Join(p, key), "required: " + std::string(what));
  if (!ReadString(n, Join(p, key), out)) return false;
  if (out->empty()) return Fail(n, Join(p, key), "must not be empty: " + std::string(what));
  return true;
}

// A decimal integer in [min, max]. REQUIRES: !Absent(n).
bool DocumentParser::ReadInt(const YAML::Node& n, const std::string& path, int64_t min, int64_t max,
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

Result<int64_t> DocumentParser::ParseDecimal(std::string_view s, int64_t min, int64_t max) {
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

bool DocumentParser::ReadInt32(const YAML::Node& n, const std::string& path, int64_t min,
                               int32_t* out) {
  int64_t v = 0;
  if (!ReadInt(n, path, min, std::numeric_limits<int32_t>::max(), &v)) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

bool DocumentParser::ReadBool(const YAML::Node& n, const std::string& path, bool* out) {
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
bool DocumentParser::ReadQuantity(const YAML::Node& n, const std::string& path, int64_t* out) {
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

bool DocumentParser::ReadEnum(const YAML::Node& n, const std::string& path,
                              std::initializer_list<std::string_view> allowed, std::string* out) {
  if (!ReadString(n, path, out)) return false;
  for (std::string_view a : allowed) {
    if (*out == a) return true;
  }
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  return Fail(n, path, Quote(*out) + " is not one of " + list);
}

bool DocumentParser::ReadStringList(const YAML::Node& n, const std::string& path, size_t max_items,
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

// A mapping of strings to strings (labels, annotations, nodeSelector).
bool DocumentParser::ReadStringMap(const YAML::Node& n, const std::string& path, size_t max_entries,
                                   KeyRule rule, std::map<std::string, std::string>* out) {
  if (!ExpectMap(n, path)) return false;
  AcceptAllFields(n);
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
bool DocumentParser::ReadResourceMap(const YAML::Node& n, const std::string& path,
                                     std::map<std::string, int64_t>* out) {
  if (!ExpectMap(n, path)) return false;
  AcceptAllFields(n);
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

bool DocumentParser::CheckSubdomain(const YAML::Node& at, const std::string& path,
                                    const std::string& name) {
  if (IsDnsSubdomain(name)) return true;
  return Fail(at, path, Quote(name) + " is not a valid name: " + kSubdomainRule);
}

bool DocumentParser::ReadDurationAnnotation(const std::map<std::string, std::string>& annotations,
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

}  // namespace admission::ops::kueue_yaml_internal
