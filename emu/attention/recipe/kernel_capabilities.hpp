#pragma once
// What each kernel that takes a recipe runs, key by key: the one table (kernel_capabilities.cpp)
// that the kernels' refusals, the capability walk (tests/gpu_host/test_kernel_capabilities_host.cpp)
// and the key reference (docs/recipe-keys.md) all read. A kernel lists every recipe key; a key it
// lists with a subset of values is one it refuses outside that subset, with the reason given.
// Keys a kernel never reads must still be declared, which is what keeps a new key from being
// silently ignored by a kernel written before it.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "emu/attention/recipe/attention_recipe.hpp"

namespace roundscope::emu {

/// The values of one key a kernel runs. Each entry of `runs` is a value, "*" (every value the
/// recipe accepts), "!VALUE" (with "*": every value but this one) or "=KEY" (the value KEY has in
/// the same recipe, e.g. p_format "=input").
struct KeyCapability {
    std::string_view key;
    std::vector<std::string_view> runs;
    std::string_view why;  // why the others are refused: what the kernel does instead
};

struct KernelCapabilities {
    std::string_view kernel;  // "emulator", "twins", "hopper"
    std::string_view title;   // what it is, for the docs and for refusals
    bool backward;            // whether it has a backward pass (without one, backward keys are never read)
    std::vector<KeyCapability> keys;
};

/// The emulator, the mma.sync CUDA twins (gpu/kernels/flash_attention.cu) and the Hopper forward kernel
/// (gpu/kernels/hopper_flash.cu), in that order. The simulated GPU runs the twins' and the Hopper
/// kernel's code, so it has their rows.
std::span<const KernelCapabilities> kernel_capabilities();

/// The kernel called `name`; Error listing the kernels otherwise.
const KernelCapabilities& kernel_named(std::string_view name);

/// `kernel`'s declaration of `key`; null where it declares none.
const KeyCapability* find_capability(const KernelCapabilities& kernel, std::string_view key);

/// Whether `kernel` runs `value` of `key` in `recipe` (value: as recipe_settings prints it).
bool runs_value(const KernelCapabilities& kernel, const AttentionRecipe& recipe, std::string_view key,
                std::string_view value);

/// Why `kernel` refuses `recipe`, as "KEY=VALUE: why" for the first key it does not run; empty
/// when it runs every setting. Backward keys count only for `backward`.
std::string capability_refusal(const KernelCapabilities& kernel, const AttentionRecipe& recipe, bool backward);

/// The recipe keys `kernel` does not declare, and the keys it declares that are not recipe keys:
/// both must be empty (tests/emu/attention/test_kernel_capabilities.cpp).
std::vector<std::string> undeclared_keys(const KernelCapabilities& kernel);
std::vector<std::string> unknown_keys(const KernelCapabilities& kernel);

/// "every value", or the values in words ("bf16, f16", "as input", "every value but auto").
std::string runs_in_words(const KeyCapability& capability);

}  // namespace roundscope::emu
