#include <catch2/catch.hpp>

#include "emu/batch/batch_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/format.hpp"
#include "lib/dtype.hpp"
#include "lib/error.hpp"

using namespace roundscope;

TEST_CASE("every emu format is a dtype of the same name and storage, and back", "[dtype]") {
    for (const emu::Format& f : emu::all_formats) {
        const auto t = find_dtype(f.name);
        REQUIRE(t);
        CHECK(is_floating(*t));
        CHECK(info(*t).value_bits == f.bits);
        CHECK(info(*t).storage_bytes == emu::storage_bytes(f));
        CHECK(emu::format_of(*t) == f);
    }
    int floating = 0;
    for (const DTypeInfo& d : all_dtypes()) floating += d.kind == DTypeKind::floating;
    CHECK(floating == static_cast<int>(std::size(emu::all_formats)));
}

TEST_CASE("dtypes are found by roundscope, safetensors and ml_dtypes names", "[dtype]") {
    CHECK(find_dtype("bf16") == DType::bf16);
    CHECK(find_dtype("BF16") == DType::bf16);
    CHECK(find_dtype("bfloat16") == DType::bf16);
    CHECK(find_dtype("F8_E4M3") == DType::e4m3);
    CHECK(find_dtype("float8_e4m3fn") == DType::e4m3);
    CHECK(find_dtype("fp4") == DType::e2m1);
    CHECK(find_dtype("float8_e8m0fnu") == DType::e8m0);
    CHECK(find_dtype("int8") == DType::mxint8);  // the MXINT8 element format of CLI.md
    CHECK(find_dtype("i8") == DType::i8);
    CHECK_FALSE(find_dtype("f8"));
    CHECK_THROWS_WITH(parse_dtype("f8", "--dtype"), Catch::Contains("--dtype: unknown dtype 'f8'"));
    CHECK_THROWS_AS(emu::format_of(DType::u16), Error);
}
