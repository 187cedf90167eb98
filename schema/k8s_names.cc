#include "schema/k8s_names.h"

#include <algorithm>

namespace admission::schema {

namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// The name part of a label key, and a non-empty label value.
bool IsQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > kK8sLabelBytesMax) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > kK8sNameBytesMax) return false;
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

bool IsQualifiedName(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return IsQualifiedNamePart(s);
  return IsDnsSubdomain(s.substr(0, slash)) && IsQualifiedNamePart(s.substr(slash + 1));
}

bool IsLabelValue(std::string_view s) { return s.empty() || IsQualifiedNamePart(s); }

}  // namespace admission::schema
