#pragma once
// The ledger's folders and files are its user's alone (docs/operations.md, "Files and modes"):
// they hold every tenant's workloads and every principal's idempotency keys.

#include <sys/types.h>

#include <string>

#include "schema/result.h"

namespace admission::ledger {

inline constexpr mode_t kPrivateDirectoryMode = 0700;
inline constexpr mode_t kPrivateFileMode = 0600;

// Creates `dir` with kPrivateDirectoryMode, whatever the umask (missing parents get the
// process's usual mode). A folder that exists keeps its mode: an operator who chose one keeps it.
// Errors: kIoError naming the folder.
Status CreatePrivateDirectory(const std::string& dir);

}  // namespace admission::ledger
