// Writes the hostile corpus and valid files of both kinds into DIR: the fuzzer's seeds.
#include <cstdio>
#include <string>

#include "lib/file_write.hpp"
#include "tests/lib/hostile_corpus.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: write_fuzz_seeds DIR\n");
        return 2;
    }
    const std::string dir = argv[1];
    auto write = [&](const std::string& name, const std::vector<std::byte>& bytes) {
        const std::span<const std::byte> parts[] = {bytes};
        roundscope::write_file(dir + "/" + name, parts);
    };
    for (const auto& h : roundscope::test::hostile_corpus()) write(h.name, h.bytes);
    write("valid.safetensors", roundscope::test::valid_safetensors_image());
    write("valid.npy", roundscope::test::valid_npy_image());
    return 0;
}
