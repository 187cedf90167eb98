#pragma once
// Command-line parsing shared by admitd and admitctl: --help prints and exits 0; any other
// parse error is a usage error, printed, exit 2 (CLI11's own codes are 105, 106, ...).

#include <optional>

#include <CLI/CLI.hpp>

namespace admission::ops {

// The exit code when the program must stop now (help or a usage error), else nullopt.
inline std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) != 0 ? 2 : 0;
  }
  return std::nullopt;
}

}  // namespace admission::ops
