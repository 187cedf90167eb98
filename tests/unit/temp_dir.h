#pragma once
// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.

#include <cstdlib>
#include <filesystem>
#include <string>

#include "schema/result.h"

namespace admission::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/admission-test-XXXXXX";
    char* made = mkdtemp(pattern.data());
    ADM_CHECK(made != nullptr, "mkdtemp %s", pattern.c_str());
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace admission::testing
