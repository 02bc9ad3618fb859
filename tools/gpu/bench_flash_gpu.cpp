// Our CUDA flash-attention kernels' forward speed, one JSON line per preset: the median of
// `--repeats` launches on random BF16 (or the preset's format) inputs, and TFLOP/s counting
// 4 N^2 D multiply-adds per head (half of them under the causal mask). tools/gpu/bench_sdpa.py
// times PyTorch's SDPA backends on the same shape, and the kit's phase B sets the two side by
// side. Built for the GPU (bench_flash_gpu) and the simulated GPU (bench_flash_gpu_host, the dry run).
//
// h100-bf16 runs on the Hopper kernel (gpu/kernels/hopper_flash.hpp) where the device is an sm_90 GPU.
//
//   bench_flash_gpu [--heads 64] [--n 4096] [--d 128] [--presets fa2-bf16,fa3-fp8,h100-bf16] [--repeats 5]
//                   [--set KEY=VALUE]... [--causal] [--inputs FILE.safetensors] [--out FILE.jsonl]
// --set changes every preset timed (e.g. exp2=ex2.approx.ftz).
// --inputs: q, k and v from a kit_inputs file (the shape is the file's), the inputs
// tools/gpu/bench_sdpa.py --inputs times PyTorch's backends on; else random ones.
// Exit 0, 1 when a preset cannot run here, 2 on bad arguments, 3 without a usable GPU.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/inputs/attention_inputs.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "gpu/device.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "lib/error.hpp"
#include "lib/safetensors.hpp"
#include "tools/gpu/kit_options.hpp"

using namespace roundscope;

namespace {

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "bench_flash_gpu: %s\nusage: bench_flash_gpu [--heads H] [--n N] [--d D] [--presets LIST] "
                 "[--repeats R] [--set KEY=VALUE]... [--causal] [--inputs FILE.safetensors] [--out FILE.jsonl]\n",
                 why.c_str());
    std::exit(2);
}

std::uint64_t number(const std::string& option, const std::string& text, std::uint64_t most) {
    const auto v = kit::number(text, 1, most);
    if (!v) usage(option + ": '" + text + "' is not a number from 1 to " + std::to_string(most));
    return *v;
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t heads = 64, n = 4096, d = 128, repeats = 5;
    bool causal = false;
    std::vector<std::string> presets{"fa2-bf16", "fa3-fp8", "h100-bf16"};
    std::string out, inputs_path;
    std::vector<std::string> settings;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--causal") {
            causal = true;
            continue;
        }
        if (i + 1 >= argc) usage("unknown or incomplete option '" + a + "'");
        const std::string v = argv[++i];
        if (a == "--heads")
            heads = number(a, v, 4096);
        else if (a == "--n")
            n = number(a, v, 1 << 20);
        else if (a == "--d")
            d = number(a, v, 256);
        else if (a == "--repeats")
            repeats = number(a, v, 1000);
        else if (a == "--out")
            out = v;
        else if (a == "--inputs")
            inputs_path = v;
        else if (a == "--presets") {
            presets = kit::split(v);
        } else if (a == "--set") {
            try {
                settings.push_back(kit::checked_setting(v));
            } catch (const Error& e) {
                usage(std::string("--set: ") + e.what());
            }
        } else {
            usage("unknown option '" + a + "'");
        }
    }
    const int cc = gpu::compute_capability();
    if (cc == 0) {
        std::fprintf(stderr, "bench_flash_gpu: no usable CUDA device\n");
        return 3;
    }
    std::ofstream file;
    if (!out.empty()) {
        file.open(out);
        if (!file) usage("--out: cannot write '" + out + "'");
    }
    // the inputs: a kit_inputs file's (its shape), or random ones of the options' shape
    std::optional<emu::AttentionInputs> inputs;
    if (!inputs_path.empty()) {
        try {
            inputs = emu::find_attention_inputs(read_safetensors(inputs_path));
        } catch (const Error& e) {
            usage(std::string("--inputs: ") + e.what());
        }
        const emu::AttentionShape s = emu::attention_shape_of(*inputs, causal, 0);
        heads = s.heads, n = s.n_q, d = s.d;
        if (s.n_kv != n || s.d_v != d) usage("--inputs: q, k and v must have one shape [H, N, D]");
    }
    int status = 0;
    const emu::AttentionShape shape{heads, n, n, d, d, causal, static_cast<float>(1.0 / std::sqrt(double(d)))};
    for (const std::string& name : presets) {
        nlohmann::json line{{"kernel", "roundscope " + name},
                            {"heads", heads},
                            {"n", n},
                            {"d", d},
                            {"causal", causal},
                            {"settings", settings},
                            {"device", gpu::device_name()}};
        try {
            emu::AttentionRecipe recipe = emu::find_recipe(name);
            kit::apply_settings(recipe, settings);
            emu::validate(recipe);
            recipe.target.arch = gpu::model_arch(cc);
            // the Hopper kernel where it runs the preset, else the twins (wgmma as mma.sync)
            const bool hopper = gpu::hopper_flash_unsupported(recipe, shape).empty();
            if (!hopper && recipe.target.instruction == "wgmma") emu::apply_setting(recipe, "instruction=mma.sync");
            // named with its settings: one preset timed twice under different --set is two kernels
            std::string kernel = std::string(hopper ? "roundscope hopper " : "roundscope ") + name;
            for (const std::string& s : settings) kernel += " " + s;
            line["kernel"] = kernel;
            const emu::AttentionOperands in = inputs ? emu::attention_operands(*inputs, *recipe.target.input, false)
                                                     : emu::random_operands(shape, *recipe.target.input, 1);
            std::vector<double> t = hopper
                                        ? gpu::time_hopper_flash_forward(recipe, shape, in, static_cast<int>(repeats))
                                        : gpu::time_flash_forward(recipe, shape, in, static_cast<int>(repeats));
            std::sort(t.begin(), t.end());
            const double median = t[t.size() / 2];
            const double flops = 4.0 * double(heads) * double(n) * double(n) * double(d) * (causal ? 0.5 : 1.0);
            line["seconds"] = t, line["median_s"] = median, line["tflops"] = flops / median / 1e12;
        } catch (const Error& e) {
            line["error"] = e.what();
            status = 1;
        }
        (out.empty() ? std::cout : file) << line.dump() << "\n" << std::flush;
    }
    return status;
}
