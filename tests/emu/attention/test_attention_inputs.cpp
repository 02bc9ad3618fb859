#include <catch2/catch.hpp>

#include "emu/attention/inputs/attention_inputs.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"
#include "tests/lib/tensor_samples.hpp"

using namespace roundscope;
using roundscope::test::random_tensor;

namespace {
TensorFile file_of(std::vector<Tensor> tensors, std::map<std::string, std::string> metadata = {}) {
    return TensorFile{"layer0.safetensors", std::move(metadata), std::move(tensors)};
}
}  // namespace

TEST_CASE("attention inputs are found by name in [N,D], [H,N,D] and [B,H,N,D]", "[attention_inputs]") {
    const emu::AttentionInputs a = emu::find_attention_inputs(
        file_of({random_tensor("q", DType::bf16, {6, 8}, 1), random_tensor("k", DType::bf16, {5, 8}, 2),
                 random_tensor("v", DType::bf16, {5, 4}, 3)}));
    CHECK((a.batch == 1 && a.heads == 1 && a.n_q == 6 && a.n_kv == 5 && a.d == 8 && a.d_v == 4));
    CHECK_FALSE(a.o);
    const emu::AttentionInputs b = emu::find_attention_inputs(
        file_of({random_tensor("q", DType::e4m3, {2, 3, 6, 8}, 1), random_tensor("k", DType::e4m3, {2, 3, 6, 8}, 2),
                 random_tensor("v", DType::e4m3, {2, 3, 6, 8}, 3), random_tensor("o", DType::bf16, {2, 3, 6, 8}, 4),
                 random_tensor("do", DType::bf16, {2, 3, 6, 8}, 5), random_tensor("lse", DType::f32, {2, 3, 6}, 6)},
                {{"causal", "true"}, {"softmax_scale", "0.125"}}));
    CHECK((b.batch == 2 && b.heads == 3));
    CHECK((b.o && b.d_o && b.lse));
    CHECK(b.causal == true);
    CHECK(b.softmax_scale == 0.125);
    CHECK(b.mask.dense.empty());
}

TEST_CASE("an additive bias is [.., Nq, Nk] per head or [Nq, Nk] for all heads", "[attention_inputs]") {
    auto with_bias = [](Shape shape) {
        return emu::find_attention_inputs(file_of(
            {random_tensor("q", DType::bf16, {2, 6, 8}, 1), random_tensor("k", DType::bf16, {2, 5, 8}, 2),
             random_tensor("v", DType::bf16, {2, 5, 4}, 3), random_tensor("bias", DType::f32, std::move(shape), 4)}));
    };
    CHECK(with_bias({2, 6, 5}).mask.dense.size() == 1);
    CHECK(with_bias({6, 5}).mask.dense.size() == 1);
    CHECK(with_bias({1, 6, 5}).mask.dense.size() == 1);  // broadcast over heads, as PyTorch broadcasts
    CHECK(with_bias({2, 1, 5}).mask.dense.size() == 1);  // one row for every query: a padding mask
    CHECK_THROWS_WITH(with_bias({5, 6}), Catch::Contains("tensor 'bias' has shape [5, 6]"));
    CHECK_THROWS_WITH(with_bias({3, 6, 5}), Catch::Contains("tensor 'bias' has shape [3, 6, 5]"));
    CHECK_THROWS_WITH(with_bias({6}), Catch::Contains("tensor 'bias' has shape [6]"));
    CHECK_THROWS_WITH(with_bias({2, 2, 2, 6, 5}), Catch::Contains("tensor 'bias' has shape [2, 2, 2, 6, 5]"));
}

TEST_CASE("the layer input x is [Nq, M] or [B, Nq, M] - the query weight wq [M, H * D] or [H, M, D]",
          "[attention_inputs]") {
    // q [B=2, H=3, N=6, D=8]
    auto with = [](std::vector<Tensor> extra) {
        std::vector<Tensor> t{random_tensor("q", DType::bf16, {2, 3, 6, 8}, 1),
                              random_tensor("k", DType::bf16, {2, 3, 5, 8}, 2),
                              random_tensor("v", DType::bf16, {2, 3, 5, 4}, 3)};
        for (Tensor& e : extra) t.push_back(std::move(e));
        return emu::find_attention_inputs(file_of(std::move(t)));
    };
    const emu::AttentionInputs fused =
        with({random_tensor("x", DType::f32, {2, 6, 10}, 4), random_tensor("wq", DType::f32, {10, 24}, 5)});
    CHECK((fused.x && fused.w_q && fused.d_model == 10 && !fused.w_q_per_head));
    CHECK(with({random_tensor("x", DType::f32, {2, 6, 10}, 4), random_tensor("wq", DType::f32, {3, 10, 8}, 5)})
              .w_q_per_head);
    CHECK_FALSE(with({random_tensor("x", DType::bf16, {2, 6, 10}, 4)}).w_q);
    CHECK_THROWS_WITH(with({random_tensor("x", DType::f32, {6, 10}, 4)}),
                      Catch::Contains("tensor 'x' has shape [6, 10]"));
    CHECK_THROWS_WITH(with({random_tensor("x", DType::f32, {2, 5, 10}, 4)}),
                      Catch::Contains("tensor 'x' has shape [2, 5, 10]"));
    CHECK_THROWS_WITH(
        with({random_tensor("x", DType::f32, {2, 6, 10}, 4), random_tensor("wq", DType::f32, {10, 8}, 5)}),
        Catch::Contains("tensor 'wq' has shape [10, 8]"));
    CHECK_THROWS_WITH(
        with({random_tensor("x", DType::f32, {2, 6, 10}, 4), random_tensor("wq", DType::f32, {3, 8, 10}, 5)}),
        Catch::Contains("tensor 'wq' has shape [3, 8, 10]"));
    CHECK_THROWS_WITH(with({random_tensor("wq", DType::f32, {10, 24}, 5)}),
                      Catch::Contains("tensor 'wq' needs the layer input 'x'"));
    CHECK_THROWS_WITH(with({random_tensor("x", DType::i32, {2, 6, 10}, 4)}), Catch::Contains("tensor 'x' has dtype"));
}

TEST_CASE("attention inputs with missing or disagreeing tensors are errors naming the file and tensor",
          "[attention_inputs]") {
    CHECK_THROWS_WITH(emu::find_attention_inputs(file_of({random_tensor("q", DType::bf16, {6, 8}, 1)})),
                      Catch::Contains("layer0.safetensors: no tensor 'k'"));
    CHECK_THROWS_WITH(emu::find_attention_inputs(file_of({random_tensor("q", DType::bf16, {2, 6, 8}, 1),
                                                          random_tensor("k", DType::bf16, {3, 6, 8}, 2),
                                                          random_tensor("v", DType::bf16, {3, 6, 8}, 3)})),
                      Catch::Contains("tensor 'k' has shape [3, 6, 8]"));
    CHECK_THROWS_WITH(emu::find_attention_inputs(file_of(
                          {random_tensor("q", DType::bf16, {6, 8}, 1), random_tensor("k", DType::bf16, {6, 8}, 2),
                           random_tensor("v", DType::bf16, {6, 8}, 3), random_tensor("lse", DType::f32, {5}, 4)})),
                      Catch::Contains("tensor 'lse'"));
    CHECK_THROWS_WITH(emu::find_attention_inputs(file_of({random_tensor("q", DType::i32, {6, 8}, 1),
                                                          random_tensor("k", DType::bf16, {6, 8}, 2),
                                                          random_tensor("v", DType::bf16, {6, 8}, 3)})),
                      Catch::Contains("floating point"));
    CHECK_THROWS_WITH(emu::find_attention_inputs(file_of(
                          {random_tensor("q", DType::bf16, {6, 8}, 1), random_tensor("k", DType::bf16, {6, 8}, 2),
                           random_tensor("v", DType::bf16, {6, 8}, 3)},
                          {{"causal", "maybe"}})),
                      Catch::Contains("metadata 'causal'"));
}

TEST_CASE("FILE:NAME selects a tensor of a safetensors file - other paths are whole files", "[tensor_io]") {
    CHECK(parse_tensor_selection("dump/layer3.safetensors:q").path == "dump/layer3.safetensors");
    CHECK(parse_tensor_selection("dump/layer3.safetensors:q").name == "q");
    CHECK(parse_tensor_selection("c:/x.safetensors:attn.k").name == "attn.k");
    CHECK(parse_tensor_selection("c:/x.safetensors:attn.k").path == "c:/x.safetensors");
    CHECK_FALSE(parse_tensor_selection("a.safetensors").name);
    CHECK_FALSE(parse_tensor_selection("v.npy").name);
    CHECK_THROWS_AS(parse_tensor_selection("a.safetensors:"), Error);
}
