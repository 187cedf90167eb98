#pragma once
// A crash test's scratch directory under $TEST_TMPDIR (or the system's temporary directory),
// removed when the test passed and kept, named on stdout, when it failed.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace admission::crash {

// The test's scratch directory; kept after a failure so the ledger can be inspected.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string pattern =
        (base != nullptr && *base != '\0' ? std::filesystem::path(base)
                                          : std::filesystem::temp_directory_path()) /
        (name + ".XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    if (::testing::Test::HasFailure()) {
      std::printf("keeping %s for inspection\n", path_.c_str());
      return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace admission::crash
