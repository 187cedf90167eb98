// Paths, Kubernetes names, YAML scalars, generated names and uids: the small pieces every kind
// shares.

#include <algorithm>
#include <cctype>

#include <openssl/evp.h>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

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

// Kubernetes' alphabet for generated names: no vowels (no words), no confusable 0/1/3.
constexpr std::string_view kGeneratedNameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

}  // namespace

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

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > kLabelBytesMax) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// Resource names ("cpu", "nvidia.com/gpu", "hugepages-2Mi", "cpu_credits"): a qualified name.
bool IsResourceName(std::string_view s) { return IsQualifiedName(s); }

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

YAML::Node Child(const YAML::Node& parent, std::string_view key) {
  if (parent.IsDefined() && parent.IsMap()) {
    if (FieldTracker* fields = CurrentFieldTracker(); fields != nullptr) fields->Looked(parent, key);
    const YAML::Node value = parent[std::string(key)];
    if (value.IsDefined()) return value;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

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

}  // namespace admission::ops::kueue_yaml_internal
