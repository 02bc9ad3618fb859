#pragma once
// The options of the package's `cast`, read as `roundscope cast` reads its flags: the same
// names, the same checks, the same one-line errors.
#include <cstdint>
#include <optional>
#include <string>

#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"

namespace roundscope::python {

struct CastRequest {
    const emu::Format* format;
    emu::CastOptions options;
};

CastRequest cast_request(const std::string& to, const std::string& round, const std::string& convention,
                         std::optional<bool> saturate, bool flush_input, bool flush_output, std::uint64_t seed);

}  // namespace roundscope::python
