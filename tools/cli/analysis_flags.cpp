#include "tools/cli/analysis_flags.hpp"

#include "lib/error.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {

ChosenInputs choose_inputs(const char* command, const std::string& input, bool synthetic,
                           const analysis::SyntheticSpec& spec, bool causal) {
    if (synthetic == !input.empty())
        throw Error(std::string(command) + ": give an input file or --synthetic, not both");
    if (synthetic) return {analysis::synthetic_attention(spec), causal, 0};
    ChosenInputs c{emu::find_attention_inputs(read_tensor_file(input)), false, 0};
    c.causal = causal || c.in.causal.value_or(false);
    c.softmax_scale = c.in.softmax_scale.value_or(0);
    return c;
}

}  // namespace roundscope::cli
