#pragma once
// Command-line parsing shared by admitd and admitctl: --help prints and exits 0; any other
// parse error is a usage error, printed, exit 2 (CLI11's own codes are 105, 106, ...).

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace admission::ops {

// The exit code when the program must stop now (help or a usage error), else nullopt.
// A word where a command was expected is named, as kubectl does (`unknown command "bogus" for
// "admitctl billing"`), rather than CLI11's "A subcommand is required".
inline std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    CLI::App* at = &app;
    std::string path = app.get_name();
    path = path.substr(path.rfind('/') + 1);  // the program, not its path
    for (bool deeper = true; deeper;) {
      deeper = false;
      for (CLI::App* sub : at->get_subcommands()) {
        at = sub;
        path += " " + sub->get_name();
        deeper = true;
        break;
      }
    }
    const std::vector<std::string> rest = app.remaining(true);
    if (at->get_require_subcommand_min() > 0 && !rest.empty() && !rest.front().empty() &&
        rest.front()[0] != '-') {
      std::cerr << "Error: unknown command \"" << rest.front() << "\" for \"" << path
                << "\"\nRun '" << path << " --help' for usage.\n";
      return 2;
    }
    return app.exit(e) != 0 ? 2 : 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) != 0 ? 2 : 0;
  }
  return std::nullopt;
}

}  // namespace admission::ops
