#pragma once
// Block quantization (OCP MX, NVFP4) of a file's tensors as a library call, and the scale rules
// compared on them.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/attention_calls.hpp"
#include "api/file_source.hpp"
#include "emu/block/block_quantize.hpp"

namespace roundscope::api {

struct MxRequest {
    FileSource source;
    std::vector<std::string> names;  // the tensors (empty: every floating one)
    std::string format;              // a block format (required)
    int block = 0;                   // 0: the format's own (32; NVFP4 16)
    int axis = -1, offset = 0;
    std::string scale_rule = "floor";
    std::string rounding;  // the elements' rounding (empty: rne)
    std::uint64_t seed = 0;
    bool single_level = false;  // NVFP4 without its per-tensor scale
    bool dequant = false;       // also each tensor dequantized, as float32
    int threads = 0;
};

/// The block spec the request names, checked (ArgumentError naming what it refuses).
emu::BlockSpec block_spec(const MxRequest& request);

/// NAME.elements, NAME.scales (NAME.per_tensor_scale for two-level NVFP4, NAME with dequant) for
/// each tensor; the metadata: the file's with the blocking; the JSON: format, block, axis, offset,
/// scale_rule, tensors [{name, shape, blocks, nan_blocks}].
TensorAnswer mx_quantize(const MxRequest& request);

/// Per tensor and scale rule: the blocks whose scale differs from floor's, scales moved, saturated
/// elements and errors: {format, block, tensors [{name, blocks, rules}]}.
nlohmann::json mx_compare_rules(const MxRequest& request);

}  // namespace roundscope::api
