#pragma once
// A growable buffer of capnp::word that builds with every compiler.
//
// capnp::word may not be copied (capnp/common.h: words are to be copied with memcpy, never as
// objects, for the aliasing rules), except under GCC, where Cap'n Proto allows it because
// GCC's -Wclass-memaccess would otherwise flag every memcpy of words. A std::vector of words
// copies them when it grows, so it builds with GCC only. This allocator constructs a word
// from another with memcpy, so the same vector also builds with clang (the sanitizer and fuzz
// build, docs/faults.md).

#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <capnp/common.h>

namespace admission::schema {

template <typename T>
struct WordAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = WordAllocator<U>;
  };
  WordAllocator() = default;
  template <typename U>
  WordAllocator(const WordAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator

  // A new word is zero (value-initialized, as std::vector's resize and size constructor make it).
  void construct(capnp::word* p) noexcept { std::memset(static_cast<void*>(p), 0, sizeof(*p)); }
  // Growing moves the words it had: as bytes.
  void construct(capnp::word* p, const capnp::word& from) noexcept {
    std::memcpy(static_cast<void*>(p), &from, sizeof(*p));
  }
  void construct(capnp::word* p, capnp::word&& from) noexcept {
    std::memcpy(static_cast<void*>(p), &from, sizeof(*p));
  }
  template <typename U, typename... Args>
    requires(!std::is_same_v<U, capnp::word>)
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Words in one flat, word-aligned array, as a capnp segment wants them.
using WordBuffer = std::vector<capnp::word, WordAllocator<capnp::word>>;

// Sets `buffer` to `words` zero words, keeping its allocation when it is large enough.
inline void ZeroWords(WordBuffer* buffer, size_t words) {
  buffer->resize(words);
  if (words > 0) std::memset(static_cast<void*>(buffer->data()), 0, words * sizeof(capnp::word));
}

}  // namespace admission::schema
