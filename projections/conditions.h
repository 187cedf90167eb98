#pragma once
// A workload's conditions. The decider sets seven types of condition, a closed set, so a
// workload keeps one slot per type inside itself: setting or reading a condition is an array
// index, with no allocation and no string compare (the decider touches a workload's conditions
// at every reservation, admission, eviction and finish). Iteration is in the order of the type
// names, the order a map keyed by name had, so the snapshot's bytes are those of that map.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace admission::projections {

// In the order of their names.
enum class ConditionType : uint8_t {
  kAdmitted,
  kDeactivated,
  kEvicted,
  kFinished,
  kPreempted,
  kQuotaReserved,
  kRequeued,
};
inline constexpr int kConditionTypes = 7;

inline constexpr std::array<std::string_view, kConditionTypes> kConditionTypeNames = {
    "Admitted", "Deactivated", "Evicted", "Finished", "Preempted", "QuotaReserved", "Requeued"};

inline std::string_view ConditionTypeName(ConditionType type) {
  return kConditionTypeNames[static_cast<size_t>(type)];
}
inline std::optional<ConditionType> ParseConditionType(std::string_view name) {
  for (size_t i = 0; i < kConditionTypeNames.size(); ++i) {
    if (kConditionTypeNames[i] == name) return static_cast<ConditionType>(i);
  }
  return std::nullopt;
}

struct Condition {
  ConditionType type = ConditionType::kAdmitted;
  bool status = false;
  std::string reason;
  std::string message;
  int64_t last_transition_ns = 0;
  std::string_view type_name() const { return ConditionTypeName(type); }
};

class ConditionSet {
 public:
  const Condition* Find(ConditionType type) const {
    return Has(type) ? &slots_[Index(type)] : nullptr;
  }
  Condition* Find(ConditionType type) { return Has(type) ? &slots_[Index(type)] : nullptr; }
  // By name; nullptr for a name that is no condition type.
  const Condition* Find(std::string_view name) const {
    auto type = ParseConditionType(name);
    return type ? Find(*type) : nullptr;
  }

  // The condition of `type`, added (with only its type set) if absent; *added says which.
  Condition& Upsert(ConditionType type, bool* added) {
    Condition& c = slots_[Index(type)];
    *added = !Has(type);
    if (*added) {
      c = Condition{};
      c.type = type;
      present_ |= Bit(type);
    }
    return c;
  }

  size_t size() const { return static_cast<size_t>(__builtin_popcount(present_)); }
  bool empty() const { return present_ == 0; }

  // The present conditions, in the order of their type names.
  class const_iterator {
   public:
    const Condition& operator*() const { return set_->slots_[i_]; }
    const Condition* operator->() const { return &set_->slots_[i_]; }
    const_iterator& operator++() {
      i_ = set_->NextFrom(i_ + 1);
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    friend class ConditionSet;
    const_iterator(const ConditionSet* set, size_t i) : set_(set), i_(i) {}
    const ConditionSet* set_;
    size_t i_;
  };
  const_iterator begin() const { return const_iterator(this, NextFrom(0)); }
  const_iterator end() const { return const_iterator(this, kConditionTypes); }

 private:
  static size_t Index(ConditionType type) { return static_cast<size_t>(type); }
  static uint32_t Bit(ConditionType type) { return 1u << Index(type); }
  bool Has(ConditionType type) const { return (present_ & Bit(type)) != 0; }
  size_t NextFrom(size_t i) const {
    while (i < kConditionTypes && (present_ & (1u << i)) == 0) ++i;
    return i;
  }

  std::array<Condition, kConditionTypes> slots_;
  uint32_t present_ = 0;
};

}  // namespace admission::projections
