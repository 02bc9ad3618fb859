// libFuzzer target over both tensor readers: any input must parse (and then decode) or give
// a roundscope::Error. Built with AddressSanitizer and UndefinedBehaviorSanitizer by
// tools/fuzz.sh, which runs it in CI; anything else — a crash, an out-of-bounds read, UB, an
// allocation over the malloc limit, another exception type — is a finding.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/npy.hpp"
#include "lib/safetensors.hpp"

using namespace roundscope;

namespace {

void decode_all(const Tensor& t) {
    // Decoding touches every byte the reader claimed; ASan checks they are inside the input.
    (void)emu::decode_tensor<double>(t, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        for (const Tensor& t : parse_safetensors(bytes, "fuzz.safetensors", nullptr).tensors) decode_all(t);
    } catch (const Error&) {
    }
    // The .npy reader, also with an explicit dtype chosen by the input's last byte.
    std::optional<DType> dtype;
    if (size > 0 && data[size - 1] < all_dtypes().size() * 2) {
        const std::size_t k = data[size - 1] / 2;
        if (k < all_dtypes().size()) dtype = all_dtypes()[k].dtype;
    }
    for (const std::optional<DType>& given : {std::optional<DType>{}, dtype}) {
        try {
            decode_all(parse_npy(bytes, "fuzz.npy", "x", nullptr, given));
        } catch (const Error&) {
        }
    }
    return 0;
}
