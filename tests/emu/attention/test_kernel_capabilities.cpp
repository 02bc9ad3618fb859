// Property: the capability table (emu/attention/recipe/kernel_capabilities.cpp) is complete and says
// what it means: every kernel declares every recipe key and no other; every value it names is
// one the key accepts; "=KEY" names a key; the emulator runs every value; a refusal names the
// key, the value and the reason. Whether each kernel keeps its row is the capability walk's
// (tests/gpu_host/test_kernel_capabilities_host.cpp).
#include <catch2/catch.hpp>

#include <string>

#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/attention/recipe/kernel_capabilities.hpp"
#include "lib/error.hpp"

using namespace roundscope;

TEST_CASE("every kernel declares every recipe key, and only those", "[capabilities]") {
    REQUIRE(emu::kernel_capabilities().size() == 4);
    for (const emu::KernelCapabilities& k : emu::kernel_capabilities()) {
        INFO(k.kernel);
        CHECK(emu::undeclared_keys(k).empty());
        CHECK(emu::unknown_keys(k).empty());
    }
    // A row that leaves a key out is caught (the check can fail).
    emu::KernelCapabilities partial = emu::kernel_named("twins");
    partial.keys.pop_back();
    CHECK(emu::undeclared_keys(partial).size() == 1);
    partial.keys.push_back({"no_such_key", {"*"}, ""});
    CHECK(emu::unknown_keys(partial) == std::vector<std::string>{"no_such_key"});
}

TEST_CASE("every value a row names is one its key accepts", "[capabilities]") {
    const std::vector<emu::RecipeKey> table = emu::recipe_key_table();
    for (const emu::KernelCapabilities& k : emu::kernel_capabilities()) {
        for (const emu::KeyCapability& c : k.keys) {
            INFO(k.kernel << " " << c.key);
            REQUIRE(!c.runs.empty());
            for (std::string_view run : c.runs) {
                if (run == "*") continue;
                if (run.starts_with('=')) {
                    CHECK(std::any_of(table.begin(), table.end(),
                                      [&](const emu::RecipeKey& key) { return key.key == run.substr(1); }));
                    continue;
                }
                emu::AttentionRecipe r;
                const std::string value(run.starts_with('!') ? run.substr(1) : run);
                CHECK_NOTHROW(emu::apply_setting(r, std::string(c.key) + "=" + value));
                CHECK(emu::recipe_settings(r).at(std::string(c.key)) == value);  // as the table prints it
            }
            if (!(c.runs.size() == 1 && c.runs[0] == "*")) CHECK(!c.why.empty());
        }
    }
}

TEST_CASE("the emulator runs every value of every key", "[capabilities]") {
    for (const emu::KeyCapability& c : emu::kernel_named("emulator").keys)
        CHECK(emu::runs_in_words(c) == "every value");
    for (const emu::AttentionRecipe& r : emu::recipe_presets())
        CHECK(emu::capability_refusal(emu::kernel_named("emulator"), r, true).empty());
}

TEST_CASE("a refusal names the key, its value and why - backward keys bind a kernel with a backward pass",
          "[capabilities]") {
    const emu::KernelCapabilities& twins = emu::kernel_named("twins");
    emu::AttentionRecipe r = emu::find_recipe("fa2-bf16");
    CHECK(emu::capability_refusal(twins, r, true).empty());
    emu::apply_setting(r, "p_format=f16");
    CHECK(emu::capability_refusal(twins, r, true) ==
          "p_format=f16: the CUDA twins multiply P and V in one format (p_format runs as input)");
    r = emu::find_recipe("fa2-bf16");
    emu::apply_setting(r, "block_n=auto");
    CHECK(emu::capability_refusal(twins, r, false) ==
          "block_n=auto: the CUDA twins need a fixed KV tile (block_n runs every value but auto, fa3-fp8, mem-eff)");
    r = emu::find_recipe("fa2-bf16");
    emu::apply_setting(r, "delta_sum=lanes16");
    CHECK(emu::capability_refusal(twins, r, false).starts_with("delta_sum=lanes16: "));  // the twins' forward too

    const emu::KernelCapabilities& hopper = emu::kernel_named("hopper");
    emu::AttentionRecipe h = emu::find_recipe("h100-bf16");
    CHECK(emu::capability_refusal(hopper, h, false).empty());
    CHECK(emu::capability_refusal(hopper, h, true).empty());  // its backward (hopper_flash_backward.cu)
    emu::apply_setting(h, "grad_quant=mxfp8_e4m3");
    CHECK(emu::capability_refusal(hopper, h, true) ==
          "grad_quant=mxfp8_e4m3: the Hopper backward does not block-quantize its operands (grad_quant runs none)");
    const emu::KernelCapabilities& fp8 = emu::kernel_named("hopper-fp8");
    emu::AttentionRecipe f = emu::find_recipe("h100-fp8");
    emu::apply_setting(f, "grad_quant=mxfp8_e4m3");  // never read: the FP8 kernel has no backward pass
    CHECK(emu::capability_refusal(fp8, f, false).empty());
    CHECK(emu::capability_refusal(fp8, f, true) ==
          "the FP8 Hopper forward kernel (gpu/kernels/hopper_fp8_flash.cu; TMA and E4M3 wgmma) has no backward pass");
    CHECK_THROWS_WITH(emu::kernel_named("tpu"), "unknown kernel 'tpu' (kernels: emulator, twins, hopper, hopper-fp8)");
}

TEST_CASE("every recipe key has a stage, a meaning, a default it accepts, and values to walk", "[capabilities]") {
    for (const emu::RecipeKey& k : emu::recipe_key_table()) {
        INFO(k.key);
        CHECK(!k.stage.empty());
        CHECK(!k.meaning.empty());
        REQUIRE(!k.values.empty());
        CHECK(std::find(k.values.begin(), k.values.end(), k.default_value) != k.values.end());
        for (const std::string& v : k.values) {
            emu::AttentionRecipe r;
            CHECK_NOTHROW(emu::apply_setting(r, k.key + "=" + v));
        }
    }
}

TEST_CASE("every key's domain can be enumerated: enumerations whole, integers as a range with a step",
          "[capabilities]") {
    const auto accepts = [](const std::string& key, const std::string& value) {
        emu::AttentionRecipe r;
        try {
            emu::apply_setting(r, key + "=" + value);
            return true;
        } catch (const Error&) {
            return false;
        }
    };
    int integers = 0, positives = 0;
    for (const emu::RecipeKey& k : emu::recipe_key_table()) {
        INFO(k.key);
        switch (k.domain.kind) {
            case emu::KeyDomain::Kind::enumeration:
                for (const std::string& v : k.values) CHECK(accepts(k.key, v));
                break;
            case emu::KeyDomain::Kind::integer:
                ++integers;
                CHECK(k.domain.step >= 1);
                CHECK(accepts(k.key, std::to_string(k.domain.min)));
                CHECK(accepts(k.key, std::to_string(k.domain.min + k.domain.step)));
                CHECK(accepts(k.key, std::to_string(k.domain.max)));
                CHECK_FALSE(accepts(k.key, std::to_string(k.domain.min - 1)));
                CHECK_FALSE(accepts(k.key, std::to_string(k.domain.max + 1)));
                CHECK((k.domain.max - k.domain.min) % k.domain.step == 0);
                for (const std::string& word : k.domain.also) CHECK(accepts(k.key, word));
                break;
            case emu::KeyDomain::Kind::positive_float32:
                ++positives;
                CHECK(accepts(k.key, "0.5"));
                CHECK_FALSE(accepts(k.key, "0"));
                CHECK_FALSE(accepts(k.key, "-1"));
                break;
        }
    }
    CHECK(integers == 8);   // block_m, block_n, aten_threads, split_kv_sms, kv_splits, max_offset, v_block, grad_seed
    CHECK(positives == 2);  // max_adjust_beta, p_scale
}
