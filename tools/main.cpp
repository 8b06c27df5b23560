// `ladder`: the command line. Subcommands register themselves (commands.hpp); main parses,
// maps errors to exit codes and runs the chosen one.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.hpp"
#include "ladder/version.hpp"

namespace ladder::cli {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace ladder::cli

int main(int argc, char** argv) {
  using namespace ladder::cli;
  CLI::App app{
      "ladder: ring-native decode attention for GQA transformers with sliding-window (ring) and growing KV "
      "caches.\nEach layer and token takes one of four routes (vec, splitk, interleaved, staged) chosen by the "
      "route ladder's predicates after the KV append.",
      "ladder"};
  app.set_version_flag("--version", std::string("ladder ") + ladder::kVersion);
  app.require_subcommand(1);
  app.fallthrough(false);

  std::vector<Command>& commands = registry();
  std::sort(commands.begin(), commands.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    runners.emplace_back(sub, c.attach(*sub));
  }

  // The command named on the line, if it is one: error messages name it and point at its help.
  std::string chosen;
  if (argc > 1 && argv[1][0] != '-') {
    chosen = argv[1];
    const bool known = std::any_of(commands.begin(), commands.end(), [&](const Command& c) { return c.name == chosen; });
    if (!known) {
      std::string names;
      for (const Command& c : commands) names += (names.empty() ? "" : ", ") + c.name;
      std::fprintf(stderr, "ladder: error: unknown command '%s' (commands: %s)\nRun 'ladder --help' for usage.\n",
                   chosen.c_str(), names.c_str());
      return kExitUsage;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const std::string where = chosen.empty() ? "ladder" : "ladder " + chosen;
    std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for usage.\n", where.c_str(), e.what(), where.c_str());
    return kExitUsage;
  }

  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const UsageError& e) {
      std::fprintf(stderr, "ladder %s: error: %s\nRun 'ladder %s --help' for usage.\n", sub->get_name().c_str(),
                   e.what(), sub->get_name().c_str());
      return kExitUsage;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ladder %s: failed: %s\n", sub->get_name().c_str(), e.what());
      return kExitFailure;
    }
  }
  return kExitUsage;
}
