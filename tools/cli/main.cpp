// roundscope: the command-line front end (docs/cli.md is its contract).
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "lib/error.hpp"
#include "tools/cli/commands.hpp"

int main(int argc, char** argv) {
    CLI::App app{"roundscope: what low-precision arithmetic does inside attention, bit for bit"};
    app.require_subcommand(1);
    roundscope::cli::add_formats_command(app);
    roundscope::cli::add_cast_command(app);
    roundscope::cli::add_inspect_command(app);
    roundscope::cli::add_mx_command(app);
    roundscope::cli::add_mma_command(app);
    roundscope::cli::add_probe_command(app);
    roundscope::cli::add_truth_command(app);
    roundscope::cli::add_attention_command(app);
    roundscope::cli::add_recipes_command(app);
    roundscope::cli::add_crosscheck_command(app);
    roundscope::cli::add_pcollapse_command(app);
    roundscope::cli::add_leak_command(app);
    roundscope::cli::add_headroom_command(app);
    roundscope::cli::add_bias_command(app);
    roundscope::cli::add_demo_command(app);
    roundscope::cli::add_attribute_command(app);
    if (argc > 1 && argv[1][0] != '-') {
        bool known = false;
        std::string names;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
            known = known || sub->get_name() == argv[1];
            names += (names.empty() ? "" : ", ") + sub->get_name();
        }
        if (!known) {
            std::fprintf(stderr, "roundscope: error: unknown command '%s' (commands: %s)\n", argv[1], names.c_str());
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // A VALUE such as -inf reads as an option; values after `--` are always positional.
        const bool negative_special = std::string_view(e.what()).find("-inf") != std::string_view::npos ||
                                      std::string_view(e.what()).find("-nan") != std::string_view::npos;
        std::fprintf(
            stderr, "roundscope: error: %s%s\n", e.what(),
            negative_special ? " (put `--` before the values when one is like -inf: cast --to e4m3 -- -inf 1)" : "");
        return 2;
    } catch (const roundscope::cli::ExitCode& e) {
        return e.code;
    } catch (const roundscope::Error& e) {
        std::fprintf(stderr, "roundscope: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "roundscope: error: internal: %s\n", e.what());
        return 2;
    }
    return 0;
}
