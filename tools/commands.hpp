// The CLI's subcommand registry: each subcommand is one file (cmd_<name>.cpp) that registers
// itself with a static Register object, so adding a command never touches main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ladder::cli {

// Exit codes, the same for every subcommand (C6).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a runtime failure: a check failed, a device error
inline constexpr int kExitUsage = 2;    // a bad command line

// A bad argument found after parsing (a position past the max context, a layer that does not
// exist): reported like a parse error, with exit code kExitUsage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Runner = std::function<int()>;

struct Command {
  std::string name;
  std::string summary;
  // Adds the command's options to its subcommand and returns what runs when it was chosen.
  // Option storage lives in the returned runner's captures.
  std::function<Runner(CLI::App&)> attach;
};

std::vector<Command>& registry();

struct Register {
  explicit Register(Command c) { registry().push_back(std::move(c)); }
};

}  // namespace ladder::cli
