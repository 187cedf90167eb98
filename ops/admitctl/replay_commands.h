#pragma once
// admitctl's replay and audit commands: `replay --verify`, `explain`. See docs/replay.md.

#include <CLI/CLI.hpp>

#include "ops/admitctl/common.h"

namespace admission::ops {

// Registers the commands on `app`. Each runs from its subcommand's callback during parsing and
// stores its exit code in *exit_code, which the caller initialises to -1 ("none ran").
// REQUIRES: global and exit_code outlive the parse.
void AddReplayCommands(CLI::App& app, GlobalOptions& global, int* exit_code);

}  // namespace admission::ops
