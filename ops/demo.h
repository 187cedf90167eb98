#pragma once
// `admitctl demo`: a small GPU platform run through the real intake path on a fresh embedded
// RocksDB ledger, narrated for a person.

#include <ostream>
#include <string>

#include "schema/result.h"

namespace admission::ops {

// REQUIRES: `dir` does not exist or is empty (the demo never touches an existing ledger).
Status RunDemo(const std::string& dir, std::ostream& out);

}  // namespace admission::ops
