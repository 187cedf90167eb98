#pragma once
// Wall time enters the system only here, at intake. The real clock is created once in main
// and passed down; tests pass a fixed one.

#include <chrono>
#include <cstdint>

namespace admission::ops {

// Interface: no fields.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace admission::ops
