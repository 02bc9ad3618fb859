// A C entry point to the batch casts, so that tests in Python can put roundscope beside a peer
// implementation (ml_dtypes) over all 2^32 float32 inputs. Test-only; not installed.
#include <cstddef>
#include <cstdint>
#include <span>

#include "emu/batch_cast.hpp"
#include "emu/cast_options.hpp"
#include "emu/format.hpp"

extern "C" {

/// Casts n floats into `format` under `convention`; saturate: 0 or 1 overrides the
/// convention, -1 keeps it. `out` holds n elements of storage_bytes(format) bytes.
/// Returns 0, or -1 for an unknown format or convention.
int roundscope_cast_f32(const float* in, std::size_t n, const char* format, const char* convention, int saturate,
                        void* out) {
    using namespace roundscope::emu;
    const Format* f = find_format(format);
    const auto c = parse_convention(convention);
    if (f == nullptr || !c) return -1;
    CastOptions o = convention_options(*c, *f);
    if (saturate >= 0) o.saturate = saturate != 0;
    const std::span<const float> input(in, n);
    switch (storage_bytes(*f)) {
        case 1: cast_batch(input, *f, o, std::span<std::uint8_t>(static_cast<std::uint8_t*>(out), n)); break;
        case 2: cast_batch(input, *f, o, std::span<std::uint16_t>(static_cast<std::uint16_t*>(out), n)); break;
        case 4: cast_batch(input, *f, o, std::span<std::uint32_t>(static_cast<std::uint32_t*>(out), n)); break;
        default: cast_batch(input, *f, o, std::span<std::uint64_t>(static_cast<std::uint64_t*>(out), n)); break;
    }
    return 0;
}
}
