// The inputs of the kit's SDPA captures (tools/gpu/sdpa_capture.py): q, k, v, do [H, N, D] in
// float32 for one synthetic scenario (analysis/synthetic_attention.hpp), made on the GPU machine
// so that only outputs travel back, and made again by `ingest.sh` on the CPU to compare them.
//
//   kit_inputs --scenario NAME --heads H --n N --d D --seed S -o FILE.safetensors
// Exit 0, or 2 on bad arguments.
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "lib/error.hpp"
#include "lib/safetensors.hpp"
#include "tools/gpu/kit_options.hpp"

using namespace roundscope;

namespace {

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "kit_inputs: %s\nusage: kit_inputs --scenario NAME --heads H --n N --d D --seed S -o FILE\n",
                 why.c_str());
    std::exit(2);
}

std::uint64_t size(const std::string& option, const std::string& value, std::uint64_t most) {
    const auto v = kit::number(value, 0, most);
    if (!v) usage(option + ": '" + value + "' is not a number from 0 to " + std::to_string(most));
    return *v;
}

}  // namespace

int main(int argc, char** argv) {
    analysis::SyntheticSpec spec;
    std::string out;
    for (int i = 1; i < argc; i += 2) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage("option '" + a + "' needs a value");
        const std::string v = argv[i + 1];
        try {
            if (a == "--scenario")
                spec.scenario = analysis::parse_scenario(v, a);
            else if (a == "--heads")
                spec.heads = size(a, v, 4096);
            else if (a == "--n")
                spec.n = size(a, v, 65536);
            else if (a == "--d")
                spec.d = size(a, v, 1024);
            else if (a == "--seed")
                spec.seed = size(a, v, ~std::uint64_t{0});
            else if (a == "-o")
                out = v;
            else
                usage("unknown option '" + a + "'");
        } catch (const Error& e) {
            usage(e.what());
        }
    }
    if (out.empty()) usage("-o is required");
    if (spec.heads == 0 || spec.n == 0 || spec.d < 2) usage("--heads and --n must be at least 1, --d at least 2");
    try {
        const emu::AttentionInputs in = analysis::synthetic_attention(spec);
        const std::vector<Tensor> tensors{in.q, in.k, in.v, *in.d_o};
        write_safetensors(
            out, tensors,
            {{"scenario", std::string(analysis::scenario_name(spec.scenario))}, {"seed", std::to_string(spec.seed)}});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kit_inputs: %s\n", e.what());
        return 1;
    }
    return 0;
}
