#pragma once
// Operating errors as values (bad input, I/O failure, stale version, refused duplicate).
// Our own bugs are not Status: they are ADM_CHECK failures that abort with the values involved.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace admission {

// A separate code exists only where some caller reacts to it differently.
enum class Code {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong; nothing was written
  kNotFound,
  kConflict,            // same idempotency key, different payload
  kTimeWentBackwards,   // recordedAt earlier than the ledger's head
  kCorruption,          // stored bytes fail decoding or the hash chain
  kIoError,             // the storage engine failed
  kBusy,                // another process holds the ledger
  kPermissionDenied,    // the caller's principal may not make this call (admitd's policy)
  kOverloaded,          // over a named limit; nothing written; retry after a while
  kUnavailable,         // the service is unreachable or shutting down; the call may be retried
  kNoSpace,             // the ledger's disk is full or below its free-space floor; nothing
                        // written; retry once space returns (docs/operations.md)
  kFailedPrecondition,  // the input is well formed but the state forbids it now (a definition
                        // still in use); nothing written; only a change elsewhere lets it pass
  kDeadlineExceeded,    // a client's call got no answer within its timeout (admitctl
                        // --timeout): the daemon may have done it or not; a retry with the same
                        // request id is safe. admitctl exits 3 for it. Never sent by admitd.
};
// The highest code; codes travel as numbers (schema/admission_rpc.capnp's Error.code), so new
// ones are only ever appended.
inline constexpr Code kCodeLast = Code::kDeadlineExceeded;

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Conflict: <message>", for people.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) {
      std::fprintf(stderr, "Result constructed from an OK status\n");
      std::abort();
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return Get(); }
  const T& value() const& { return const_cast<Result*>(this)->Get(); }
  T&& value() && { return std::move(Get()); }
  T* operator->() { return &Get(); }
  T& operator*() { return Get(); }

 private:
  T& Get() {
    if (!ok()) {
      std::fprintf(stderr, "value() of a failed Result: %s\n",
                   std::get<Status>(v_).ToString().c_str());
      std::abort();
    }
    return std::get<T>(v_);
  }
  std::variant<T, Status> v_;
};

}  // namespace admission

// Assertions stay on in every build. They are for our own bugs, never for bad input.
#define ADM_CHECK(cond, ...)                                                     \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                         \
      std::fputc('\n', stderr);                                                  \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

#define ADM_RETURN_IF_ERROR(expr)       \
  do {                                  \
    ::admission::Status _s = (expr);    \
    if (!_s.ok()) return _s;            \
  } while (0)
