#pragma once
// Kubernetes' name rules (apimachinery's validation), shared by the Kueue YAML reader (ops/) and
// the decider's intake checks (projections/): one definition, so a key both accept is the same.

#include <cstddef>
#include <string_view>

namespace admission::schema {

inline constexpr size_t kK8sNameBytesMax = 253;  // RFC 1123 subdomain: object names
inline constexpr size_t kK8sLabelBytesMax = 63;  // RFC 1123 label; a label value, a key's name

// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
bool IsDnsSubdomain(std::string_view s);
// Label and annotation keys: [prefix/]name, the prefix a DNS subdomain, the name
// [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? of at most 63 characters.
bool IsQualifiedName(std::string_view s);
// A label value: empty, or as a key's name part.
bool IsLabelValue(std::string_view s);

}  // namespace admission::schema
