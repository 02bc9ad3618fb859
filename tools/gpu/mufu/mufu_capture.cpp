#include "tools/gpu/mufu/mufu_capture.hpp"

#include <limits>

#include "lib/error.hpp"
#include "lib/safetensors.hpp"

namespace roundscope::gpu {
namespace {

constexpr std::int8_t escaped = std::numeric_limits<std::int8_t>::min();

std::vector<Tensor> encode(const MufuCapturedWindow& w, const std::string& name) {
    std::vector<std::int8_t> step(w.outputs.size(), 0);
    std::vector<std::int64_t> escape;
    for (std::size_t j = 1; j < w.outputs.size(); ++j) {
        const std::int64_t d = std::int64_t{w.outputs[j]} - std::int64_t{w.outputs[j - 1]};
        if (d > escaped && d <= std::numeric_limits<std::int8_t>::max()) {
            step[j] = static_cast<std::int8_t>(d);
        } else {
            step[j] = escaped;
            escape.push_back(d);
        }
    }
    const std::uint32_t first_output = w.outputs.empty() ? 0 : w.outputs[0];
    return {Tensor::of_bits(name + ".first", DType::u32, {2}, std::vector<std::uint32_t>{w.first, first_output}),
            Tensor::of_bits(name + ".step", DType::i8, {step.size()}, step),
            Tensor::of_bits(name + ".escape", DType::i64, {escape.size()}, escape)};
}

MufuCapturedWindow decode(const TensorFile& f, const std::string& name) {
    const Tensor &first = f.get(name + ".first"), &step = f.get(name + ".step"), &escape = f.get(name + ".escape");
    if (first.dtype() != DType::u32 || first.size() != 2 || step.dtype() != DType::i8 || escape.dtype() != DType::i64)
        throw Error(f.path + ": " + name + ": expected first U32 [2], step I8, escape I64");
    if (step.size() == 0 || step.size() > (std::uint64_t{1} << 32) - first.bits_at(0))
        throw Error(f.path + ": " + name + ": the window is empty or leaves the 2^32 inputs");
    MufuCapturedWindow w;
    w.first = static_cast<std::uint32_t>(first.bits_at(0));
    w.outputs.resize(step.size());
    std::int64_t value = static_cast<std::int64_t>(first.bits_at(1));
    std::uint64_t next_escape = 0;
    for (std::uint64_t j = 0; j < step.size(); ++j) {
        if (j > 0) {
            const auto s = static_cast<std::int8_t>(step.bits_at(j));
            if (s != escaped) {
                value += s;
            } else {
                if (next_escape == escape.size()) throw Error(f.path + ": " + name + ": the escape list is too short");
                value += static_cast<std::int64_t>(escape.bits_at(next_escape++));
            }
        }
        if (value < 0 || value > std::numeric_limits<std::uint32_t>::max())
            throw Error(f.path + ": " + name + ": an output leaves 32 bits");
        w.outputs[j] = static_cast<std::uint32_t>(value);
    }
    if (next_escape != escape.size()) throw Error(f.path + ": " + name + ": the escape list is too long");
    return w;
}

}  // namespace

void write_mufu_capture(const std::string& path, const MufuCapture& capture) {
    if (capture.digests.size() != mufu_chunks)
        throw Error("MUFU capture: expected " + std::to_string(mufu_chunks) + " digests");
    std::vector<Tensor> tensors{Tensor::of_bits("digests", DType::u64, {mufu_chunks}, capture.digests)};
    for (std::size_t i = 0; i < capture.windows.size(); ++i)
        for (Tensor& t : encode(capture.windows[i], "window" + std::to_string(i))) tensors.push_back(std::move(t));
    std::map<std::string, std::string> metadata = capture.metadata;
    metadata["variant"] = std::string(mufu_ptx(capture.variant));
    metadata["windows"] = std::to_string(capture.windows.size());
    write_safetensors(path, tensors, metadata);
}

MufuCapture read_mufu_capture(const std::string& path) {
    const TensorFile f = read_safetensors(path);
    MufuCapture c;
    c.metadata = f.metadata;
    const auto variant = f.metadata.find("variant");
    if (variant == f.metadata.end() || !find_mufu_variant(variant->second))
        throw Error(path + ": not a MUFU capture (metadata 'variant' is missing or unknown)");
    c.variant = *find_mufu_variant(variant->second);
    const Tensor& digests = f.get("digests");
    if (digests.dtype() != DType::u64 || digests.size() != mufu_chunks)
        throw Error(path + ": digests: expected U64 [" + std::to_string(mufu_chunks) + "]");
    c.digests.resize(mufu_chunks);
    for (std::size_t j = 0; j < mufu_chunks; ++j) c.digests[j] = digests.bits_at(j);
    std::size_t windows = 0;
    try {
        windows = std::stoul(f.metadata.at("windows"));
    } catch (const std::exception&) {
        throw Error(path + ": metadata 'windows' is missing or not a count");
    }
    if (windows > 64) throw Error(path + ": more than 64 windows");
    for (std::size_t i = 0; i < windows; ++i) c.windows.push_back(decode(f, "window" + std::to_string(i)));
    return c;
}

}  // namespace roundscope::gpu
