#pragma once
// Running the admitctl binary from a test, and the small helpers the cross-process tests share.
// The includer defines ADMITCTL_PATH (see tests/property/CMakeLists.txt).

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ledger/rocksdb_log.h"
#include "tests/property/scenario_gen.h"

#ifndef ADMITCTL_PATH
#error "ADMITCTL_PATH must name the admitctl binary (see CMakeLists.txt)"
#endif

namespace admission::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct ProcessRun {
  int exit_code = -1;
  std::string out, err;
  std::string all() const { return out + err; }
};

// Runs admitctl with `args`, capturing stdout and stderr apart.
inline ProcessRun Admitctl(const std::vector<std::string>& args) {
  static int calls = 0;
  const std::string err_path = std::filesystem::temp_directory_path() /
                               ("admitctl-err-" + std::to_string(::getpid()) + "-" +
                                std::to_string(++calls));
  std::string command = std::string(ADMITCTL_PATH);
  for (const std::string& a : args) command += " '" + a + "'";
  command += " 2>" + err_path;
  ProcessRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) run.out.append(buf, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.err = ReadFile(err_path);
  std::filesystem::remove(err_path);
  return run;
}

inline nlohmann::json ParseJson(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// Records scenario `s` into a new RocksDB ledger at `dir` (closed on return).
inline void WriteRocksLedger(const ScenarioGen& s, const std::string& dir) {
  auto log = ledger::RocksDbLog::Open(dir);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  RecordScenario(s, **log);
}

}  // namespace admission::testing
