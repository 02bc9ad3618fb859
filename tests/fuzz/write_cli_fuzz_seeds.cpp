// Writes the option fuzzer's seeds and dictionary from the app itself, so that they follow
// every command and option as they change: each command alone, with --help, and with each of
// its options given its default value (or a flag alone); the dictionary holds every command,
// option name and default.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "lib/file_write.hpp"

namespace {

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (const unsigned char c : s) {
        if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            out += hex;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: write_cli_fuzz_seeds SEED_DIR DICTIONARY\n");
        return 2;
    }
    const std::string dir = argv[1];
    CLI::App app{"roundscope"};
    roundscope::cli::add_all_commands(app);

    std::set<std::string> words;
    int seeds = 0;
    auto seed = [&](const std::vector<std::string>& args) {
        std::string bytes;
        for (std::size_t i = 0; i < args.size(); ++i) bytes += (i ? std::string(1, '\0') : "") + args[i];
        const std::span<const std::byte> parts[] = {std::as_bytes(std::span(bytes))};
        roundscope::write_file(dir + "/seed" + std::to_string(seeds++), parts);
    };
    seed({"--version"});
    seed({"--help"});
    for (const CLI::App* cmd : app.get_subcommands([](const CLI::App*) { return true; })) {
        const std::string name = cmd->get_name();
        words.insert(name);
        seed({name});
        seed({name, "--help"});
        for (const CLI::Option* opt : cmd->get_options()) {
            if (opt->get_lnames().empty() && opt->get_snames().empty()) {  // a positional
                if (!opt->get_default_str().empty()) words.insert(opt->get_default_str());
                continue;
            }
            const std::string flag =
                opt->get_lnames().empty() ? "-" + opt->get_snames().front() : "--" + opt->get_lnames().front();
            if (flag == "--help") continue;
            words.insert(flag);
            if (opt->get_type_size() == 0) {
                seed({name, flag});
            } else {
                const std::string value = opt->get_default_str().empty() ? "1" : opt->get_default_str();
                words.insert(value);
                seed({name, flag, value});
            }
        }
    }
    std::string dictionary;
    for (const std::string& w : words) dictionary += quoted(w) + "\n";
    const std::span<const std::byte> parts[] = {std::as_bytes(std::span(dictionary))};
    roundscope::write_file(argv[2], parts);
    std::printf("%d seeds, %zu dictionary words\n", seeds, words.size());
    return 0;
}
