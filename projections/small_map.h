#pragma once
// A map from strings to values for a handful of entries, kept as a vector of pairs sorted by
// key: one allocation and a few cache lines instead of a tree node per entry. A workload's
// conditions live in one; the decider reads them when it touches a workload it last saw long
// ago, when each tree node would be a cache miss. The subset of std::map's interface the decider
// uses, with the same iteration order (by key). Inserting invalidates iterators and references.

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace admission::projections {

template <typename V>
class SmallStringMap {
 public:
  using value_type = std::pair<std::string, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }

  iterator find(std::string_view key) { return Find(items_, key); }
  const_iterator find(std::string_view key) const { return Find(items_, key); }

  // Inserts (key, V(args...)) unless the key is there; as std::map::emplace.
  template <typename... Args>
  std::pair<iterator, bool> emplace(std::string key, Args&&... args) {
    auto it = LowerBound(key);
    if (it != items_.end() && it->first == key) return {it, false};
    if (items_.capacity() == 0) {
      items_.reserve(kFirstCapacity);
      it = items_.end();  // empty: the only place
    }
    it = items_.emplace(it, std::piecewise_construct, std::forward_as_tuple(std::move(key)),
                        std::forward_as_tuple(std::forward<Args>(args)...));
    return {it, true};
  }

  bool operator==(const SmallStringMap& other) const { return items_ == other.items_; }

 private:
  // For both constnesses of the vector.
  template <typename Items>
  static auto LowerBound(Items& items, std::string_view key) {
    return std::lower_bound(items.begin(), items.end(), key,
                            [](const value_type& item, std::string_view k) { return item.first < k; });
  }
  template <typename Items>
  static auto Find(Items& items, std::string_view key) {
    auto it = LowerBound(items, key);
    return it != items.end() && it->first == key ? it : items.end();
  }
  iterator LowerBound(std::string_view key) { return LowerBound(items_, key); }

  // Room made at the first insertion: a workload collects about this many conditions.
  static constexpr size_t kFirstCapacity = 8;
  std::vector<value_type> items_;
};

}  // namespace admission::projections
