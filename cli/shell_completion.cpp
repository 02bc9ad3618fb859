#include "cli/shell_completion.hpp"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/block/block_format.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::cli {
namespace {

struct OptionInfo {
    std::vector<std::string> names;  // "--to", "-o"
    std::string description;
    bool takes_value = false;
};

struct CommandInfo {
    std::string name, description;
    std::vector<OptionInfo> options;
};

std::vector<CommandInfo> commands_of(const CLI::App& app) {
    std::vector<CommandInfo> out;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        CommandInfo c{sub->get_name(), sub->get_description(), {}};
        for (const CLI::Option* o : sub->get_options()) {
            if (o->get_positional() && o->get_lnames().empty() && o->get_snames().empty()) continue;
            OptionInfo info{{}, o->get_description(), o->get_expected_max() > 0};  // a flag expects none
            for (const std::string& l : o->get_lnames()) info.names.push_back("--" + l);
            for (const std::string& s : o->get_snames()) info.names.push_back("-" + s);
            if (!info.names.empty()) c.options.push_back(info);
        }
        out.push_back(c);
    }
    return out;
}

std::string joined(const std::vector<std::string>& words) {
    std::string s;
    for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
    return s;
}

// The values an option takes where they come from a table: by command ("" for any) and option.
std::map<std::pair<std::string, std::string>, std::vector<std::string>> option_values() {
    std::vector<std::string> recipes, formats, blocks;
    for (const auto& r : emu::recipe_presets()) recipes.push_back(r.name);
    for (const auto& f : emu::all_formats) formats.emplace_back(f.name);
    for (const auto& b : emu::all_block_formats) blocks.emplace_back(b.name);
    return {
        {{"", "--recipe"}, recipes},
        {{"", "--round"}, {"rne", "rna", "rtz", "up", "down", "odd", "sr"}},
        {{"", "--convention"}, {"cuda", "ocp", "ml_dtypes", "torch"}},
        {{"", "--arch"}, {"sm80", "sm89", "sm90", "sm100"}},
        {{"cast", "--to"}, formats},
        {{"cast", "--dtype"}, formats},
        {{"mx", "--format"}, blocks},
        {{"leak", "--format"}, blocks},
        {{"completion", "SHELL"}, {"bash", "zsh"}},
    };
}

// zsh's _arguments reads ':' and brackets in a description as syntax.
std::string zsh_text(std::string s) {
    std::string out;
    for (char c : s) {
        if (c == '[' || c == ']') c = c == '[' ? '(' : ')';
        if (c == '\'')
            out += "'\\''";
        else if (c == ':')
            out += "\\:";
        else
            out += c;
    }
    return out;
}

const std::vector<std::string>* values_for(
    const std::map<std::pair<std::string, std::string>, std::vector<std::string>>& values, const std::string& command,
    const std::string& option) {
    if (auto it = values.find({command, option}); it != values.end()) return &it->second;
    if (auto it = values.find({"", option}); it != values.end()) return &it->second;
    return nullptr;
}

}  // namespace

std::string bash_completion(const CLI::App& app) {
    const auto commands = commands_of(app);
    const auto values = option_values();
    std::vector<std::string> names;
    for (const auto& c : commands) names.push_back(c.name);
    std::string value_cases, option_cases;
    for (const auto& c : commands) {
        std::vector<std::string> words;
        for (const auto& o : c.options) {
            words.insert(words.end(), o.names.begin(), o.names.end());
            if (!o.takes_value) continue;
            for (const std::string& n : o.names)
                if (const auto* v = values_for(values, c.name, n))
                    value_cases += fmt::format("        {}:{}) words=\"{}\" ;;\n", c.name, n, joined(*v));
        }
        option_cases += fmt::format("        {}) words=\"{}\" ;;\n", c.name, joined(words));
    }
    return fmt::format(R"(# bash completion for roundscope (roundscope completion bash), generated from its commands.
# Load it: source <(roundscope completion bash)
_roundscope() {{
    local cur prev command words i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    command=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in -*) ;; *) command="${{COMP_WORDS[i]}}"; break ;; esac
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W "{} --help --version" -- "$cur"))
        return
    fi
    if [[ "$command" == completion && "$prev" == completion && "$cur" != -* ]]; then
        COMPREPLY=($(compgen -W "bash zsh" -- "$cur"))
        return
    fi
    words=""
    case "$command:$prev" in
{}    esac
    if [[ -n "$words" ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    if [[ "$cur" == -* ]]; then
        case "$command" in
{}        esac
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -o filenames -o bashdefault -F _roundscope roundscope
)",
                       joined(names), value_cases, option_cases);
}

std::string zsh_completion(const CLI::App& app) {
    const auto commands = commands_of(app);
    const auto values = option_values();
    std::string list, cases;
    for (const auto& c : commands) {
        list += fmt::format("        '{}:{}'\n", c.name, zsh_text(c.description));
        std::string specs;
        for (const auto& o : c.options) {
            for (const std::string& n : o.names) {
                std::string spec = fmt::format("'*{}[{}]", n, zsh_text(o.description));
                if (o.takes_value) {
                    const auto* v = values_for(values, c.name, n);
                    spec += v ? fmt::format(":value:({})", joined(*v)) : std::string(":value:_files");
                }
                specs += " \\\n                " + spec + "'";
            }
        }
        if (c.name == "completion")
            specs += " \\\n                '1:shell:(bash zsh)'";
        else
            specs += " \\\n                '*:file:_files'";
        cases += fmt::format("        {})\n            _arguments -s{} ;;\n", c.name, specs);
    }
    return fmt::format(R"(#compdef roundscope
# zsh completion for roundscope (roundscope completion zsh), generated from its commands.
# Load it: roundscope completion zsh > "${{fpath[1]}}/_roundscope", or source <(roundscope completion zsh)
_roundscope() {{
    local -a commands
    commands=(
{}    )
    if (( CURRENT == 2 )); then
        _describe 'command' commands
        return
    fi
    local command=${{words[2]}}
    shift words
    (( CURRENT-- ))
    case $command in
{}    esac
}}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _roundscope "$@"
else
    compdef _roundscope roundscope
fi
)",
                       list, cases);
}

}  // namespace roundscope::cli
