// The MUFU probe: every variant of gpu/probes/mufu_variants.hpp over all 2^32 inputs, one capture file
// per variant (mufu_capture.hpp). On a GPU it runs the hardware; with --fake, the invented unit
// of fake_mufu.hpp (the kit's dry run, on any machine).
//
//   mufu_probe --out DIR [--fake] [--variants ex2.approx.ftz.f32,...] [--threads N]
//              [--windows FIRST:COUNT,...]   (hex input patterns; replace the fit's default windows)
// Exit 0 on success, 2 on bad arguments, 3 without a usable GPU (and no --fake).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lib/error.hpp"
#include "tools/gpu/mufu/fake_mufu.hpp"
#include "tools/gpu/mufu/mufu_capture.hpp"
#if ROUNDSCOPE_MUFU_HARDWARE
#include "gpu/device.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "gpu/probes/mufu_probe.hpp"
#endif

using namespace roundscope;

namespace {

struct Options {
    std::string out;
    bool fake = false;
    std::vector<gpu::MufuVariant> variants{gpu::mufu_variants.begin(), gpu::mufu_variants.end()};
    int threads = 0;
    std::vector<gpu::MufuWindow> windows;  // empty: gpu::mufu_windows(variant)
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "mufu_probe: %s\nusage: mufu_probe --out DIR [--fake] [--variants PTX,...] [--threads N] [--windows "
                 "FIRST:COUNT,...]\n",
                 why.c_str());
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--fake") {
            o.fake = true;
        } else if (a == "--out" && has_value) {
            o.out = argv[++i];
        } else if (a == "--threads" && has_value) {
            o.threads = std::atoi(argv[++i]);
        } else if (a == "--variants" && has_value) {
            o.variants.clear();
            std::string_view list = argv[++i];
            while (!list.empty()) {
                const std::string_view name = list.substr(0, list.find(','));
                const auto v = gpu::find_mufu_variant(name);
                if (!v) usage("--variants: unknown variant '" + std::string(name) + "'");
                o.variants.push_back(*v);
                list.remove_prefix(std::min(list.size(), name.size() + 1));
            }
        } else if (a == "--windows" && has_value) {
            std::string_view list = argv[++i];
            while (!list.empty()) {
                const std::string item(list.substr(0, list.find(',')));
                unsigned long long first = 0, count = 0;
                char tail = 0;
                if (std::sscanf(item.c_str(), "%llx:%llx%c", &first, &count, &tail) != 2 || count == 0 ||
                    first + count > (1ull << 32))
                    usage("--windows: '" + item + "' is not FIRST:COUNT in hex within the 2^32 patterns");
                o.windows.push_back({static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(count), "asked"});
                list.remove_prefix(std::min(list.size(), item.size() + 1));
            }
        } else {
            usage("unknown or incomplete option '" + std::string(a) + "'");
        }
    }
    if (o.out.empty()) usage("--out is required");
    if (o.variants.empty()) usage("--variants: no variant");
    return o;
}

std::vector<gpu::MufuWindow> windows_of(const Options& o, gpu::MufuVariant v) {
    return o.windows.empty() ? gpu::mufu_windows(v) : o.windows;
}

gpu::MufuCapture capture(const Options& o, gpu::MufuVariant v) {
    gpu::MufuCapture c;
    c.variant = v;
    c.metadata["unit"] = o.fake ? "fake" : "hardware";
    if (o.fake) {
        c.metadata["device"] = "the invented unit of tools/gpu/mufu/fake_mufu.hpp (not a GPU)";
        c.digests = gpu::fake::digests(v, o.threads);
        for (const gpu::MufuWindow& w : windows_of(o, v))
            c.windows.push_back({w.first, gpu::fake::outputs(v, w.first, w.count)});
        return c;
    }
#if ROUNDSCOPE_MUFU_HARDWARE
    c.metadata["device"] = gpu::device_name();
    c.metadata["compute_capability"] = std::to_string(gpu::compute_capability());
    c.metadata["cuda_compiler"] = gpu::cuda_compiler();
    c.metadata["cuda_runtime"] = gpu::cuda_runtime_version();
    c.metadata["cuda_driver"] = gpu::cuda_driver_version();
    c.digests = gpu::mufu_digests(v);
    for (const gpu::MufuWindow& w : windows_of(o, v))
        c.windows.push_back({w.first, gpu::mufu_outputs(v, w.first, w.count)});
#endif
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
#if ROUNDSCOPE_MUFU_HARDWARE
    if (!o.fake && gpu::compute_capability() == 0) {
        std::fprintf(stderr, "mufu_probe: no usable CUDA device (use --fake for the invented unit)\n");
        return 3;
    }
#else
    if (!o.fake) {
        std::fprintf(stderr, "mufu_probe: built without CUDA; only --fake runs here\n");
        return 3;
    }
#endif
    try {
        std::filesystem::create_directories(o.out);
        for (const gpu::MufuVariant v : o.variants) {
            const auto start = std::chrono::steady_clock::now();
            const gpu::MufuCapture c = capture(o, v);
            const std::string path = o.out + "/mufu_" + std::string(gpu::mufu_ptx(v)) + ".safetensors";
            gpu::write_mufu_capture(path, c);
            std::printf("%s: %zu digests, %zu windows, %.1f s -> %s\n", std::string(gpu::mufu_ptx(v)).c_str(),
                        c.digests.size(), c.windows.size(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), path.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mufu_probe: %s\n", e.what());
        return 1;
    }
    return 0;
}
