#include "emu/mma/mma_tensors.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

std::string where(const TensorFile& file, std::string_view tensor) {
    return fmt::format("{}: tensor '{}'", file.path, tensor);
}

const Format& float_format(const TensorFile& file, const Tensor& t) {
    try {
        return format_of(t.dtype());
    } catch (const Error&) {
        throw Error(
            fmt::format("{}: dtype {} is not a floating format", where(file, t.name()), roundscope::name(t.dtype())));
    }
}

// [T, R, C] or [R, C] as {T, R, C}.
std::array<std::int64_t, 3> matrix_shape(const TensorFile& file, const Tensor& t) {
    const Shape& s = t.shape();
    if (s.size() == 2) return {1, static_cast<std::int64_t>(s[0]), static_cast<std::int64_t>(s[1])};
    if (s.size() == 3)
        return {static_cast<std::int64_t>(s[0]), static_cast<std::int64_t>(s[1]), static_cast<std::int64_t>(s[2])};
    throw Error(
        fmt::format("{}: shape {} is not [tiles, rows, cols] or [rows, cols]", where(file, t.name()), shape_string(s)));
}

std::vector<std::uint32_t> element_bits(const Tensor& t) {
    std::vector<std::uint32_t> out(t.size());
    for (std::uint64_t i = 0; i < t.size(); ++i) out[i] = static_cast<std::uint32_t>(t.bits_at(i));
    return out;
}

// The architectures that have models ("sm80", "sm89", "sm90", "sm100").
std::vector<std::string_view> mma_architectures() {
    std::vector<std::string_view> out;
    for (const MmaModel& m : all_mma_models()) {
        if (std::find(out.begin(), out.end(), m.arch) == out.end()) out.push_back(m.arch);
    }
    return out;
}

}  // namespace

void check_mma_architecture(std::string_view arch) {
    const auto known = mma_architectures();
    if (std::find(known.begin(), known.end(), arch) == known.end())
        throw Error(fmt::format("unknown architecture '{}' (known: {})", printable(arch), fmt::join(known, ", ")));
}

MmaCheck check_mma(const MmaProblem& p, const std::vector<std::uint32_t>& d, std::size_t keep) {
    MmaCheck out;
    out.total = d.size();
    const std::int64_t per_tile = p.m * p.n;
    for (std::size_t i = 0; i < d.size(); ++i) {
        if (d[i] == (*p.d)[i]) {
            ++out.matched;
            continue;
        }
        const auto tile = static_cast<std::int64_t>(i) / per_tile, in_tile = static_cast<std::int64_t>(i) % per_tile;
        if (!p.dist.empty()) ++out.by_dist[p.dist[static_cast<std::size_t>(tile)]];
        if (out.first.size() < keep) out.first.push_back({tile, in_tile / p.n, in_tile % p.n, p.c[i], (*p.d)[i], d[i]});
    }
    return out;
}

MmaProblem load_mma_problem(const TensorFile& file, std::string_view arch, std::string_view instruction) {
    check_mma_architecture(arch);
    for (const char* name : {"A", "B"}) {
        if (file.find(name) == nullptr)
            throw Error(fmt::format("{}: no tensor '{}' (an MMA file holds A, B and C)", file.path, name));
    }
    const Tensor& ta = file.get("A");
    const Tensor& tb = file.get("B");
    const Tensor* tc = file.find("C");
    const Format& fa = float_format(file, ta);
    const Format& fb = float_format(file, tb);
    const Format& acc = tc != nullptr ? float_format(file, *tc) : f32;

    const auto [ta_n, m, k] = matrix_shape(file, ta);
    const auto [tb_n, kb, n] = matrix_shape(file, tb);
    if (tb_n != ta_n || kb != k || ta.shape().size() != tb.shape().size()) {
        throw Error(fmt::format("{}: shape {} does not match A {} (want [{}{}, N])", where(file, "B"),
                                shape_string(tb.shape()), shape_string(ta.shape()),
                                ta.shape().size() == 3 ? fmt::format("{}, ", ta_n) : "", k));
    }
    const Shape want_c = ta.shape().size() == 3 ? Shape{static_cast<std::uint64_t>(ta_n), static_cast<std::uint64_t>(m),
                                                        static_cast<std::uint64_t>(n)}
                                                : Shape{static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(n)};
    for (const char* name : {"C", "D"}) {
        const Tensor* t = file.find(name);
        if (t == nullptr) continue;
        if (t->shape() != want_c) {
            throw Error(fmt::format("{}: shape {} where A and B need {}", where(file, name), shape_string(t->shape()),
                                    shape_string(want_c)));
        }
        if (!(float_format(file, *t) == acc)) {
            throw Error(fmt::format("{}: dtype {} differs from C's {}", where(file, name), roundscope::name(t->dtype()),
                                    acc.name));
        }
    }

    // Without --instruction, the instruction the file says it captured (roundscope probe writes
    // "wgmma.mma_async..." or "mma.sync...") where `arch` has a model of it, else the default.
    MmaProblem p;
    if (instruction.empty()) {
        const auto it = file.metadata.find("instruction");
        if (it != file.metadata.end()) {
            for (std::string_view known : {"mma.sync", "wgmma", "tcgen05.mma"})
                if (it->second.rfind(known, 0) == 0 && find_mma_model(arch, known, fa, fb, acc) != nullptr)
                    instruction = known;
        }
    }
    p.model = find_mma_model(arch, instruction, fa, fb, acc);
    if (p.model == nullptr) {
        throw Error(fmt::format("{}: no {} {} tensor-core model for A {}, B {}, C {}", file.path, arch,
                                instruction.empty() ? "mma.sync" : instruction, fa.name, fb.name, acc.name));
    }
    p.batch = ta_n;
    p.m = m;
    p.n = n;
    p.k = k;
    p.batched = ta.shape().size() == 3;
    p.a = element_bits(ta);
    p.b = element_bits(tb);
    p.c = tc != nullptr ? element_bits(*tc) : std::vector<std::uint32_t>(static_cast<std::size_t>(ta_n * m * n), 0);
    if (const Tensor* td = file.find("D")) p.d = element_bits(*td);
    if (const Tensor* dist = file.find("dist");
        dist != nullptr && dist->shape() == Shape{static_cast<std::uint64_t>(ta_n)}) {
        for (std::uint64_t i = 0; i < dist->size(); ++i) p.dist.push_back(static_cast<std::uint8_t>(dist->bits_at(i)));
    }
    return p;
}

}  // namespace roundscope::emu
