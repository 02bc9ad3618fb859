// `roundscope completion bash|zsh`: the shell's completion script for every command and option
// (cli/shell_completion.hpp), printed to standard output.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/shell_completion.hpp"
#include "lib/named_values.hpp"

namespace roundscope::cli {
namespace {

enum class Shell { bash, zsh };
constexpr NamedValues<Shell, 2> shells{{{{Shell::bash, "bash"}, {Shell::zsh, "zsh"}}}};

}  // namespace

void add_completion_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("completion", "Print the completion script of a shell (bash or zsh)");
    auto shell = std::make_shared<std::string>();
    cmd->add_option("SHELL", *shell, "bash or zsh")->required();
    cmd->footer("Example: source <(roundscope completion bash)   (zsh: source <(roundscope completion zsh))\n");
    cmd->callback([shell] {
        const Shell s = shells.parse("completion", *shell);
        CLI::App full{"roundscope"};
        add_all_commands(full);
        fmt::print("{}", s == Shell::bash ? bash_completion(full) : zsh_completion(full));
    });
}

}  // namespace roundscope::cli
