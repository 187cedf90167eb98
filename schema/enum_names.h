// Reading an enum back from its name. Each enum keeps its names in one function (a switch, so
// the compiler names a missing case); this finds the enumerator a name stands for by asking that
// function, so the names are never written twice.

#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

namespace admission {

// The enumerator in [first, last] (their values contiguous) whose name(e) equals `text`;
// nullopt for any other text. Tries each enumerator once, in order (the range is a handful).
template <typename Enum, typename NameOf>
std::optional<Enum> EnumFromName(std::string_view text, Enum first, Enum last, NameOf name) {
  static_assert(std::is_enum_v<Enum>);
  const long long end = static_cast<long long>(last);  // wider than any enum here: no wrap
  for (long long v = static_cast<long long>(first); v <= end; ++v) {
    const Enum e = static_cast<Enum>(v);
    if (text == std::string_view(name(e))) return e;
  }
  return std::nullopt;
}

}  // namespace admission
