// `inspect` throughput on one tensor file against reading the same file, measured in the same
// run: the baseline is read(2) of every byte into a 16 MB buffer (what `cat` does), and
// `inspect` is the memory-mapped, multi-threaded tensor_stats over every tensor. With
// --cold, the page cache is dropped before each measurement (needs root), so both read disk.
//
//   bench_inspect FILE.safetensors [--simd TARGET] [--cold] [--threads N]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/tensor_stats.hpp"
#include "lib/parallel.hpp"
#include "lib/tensor_io.hpp"
#include "tools/bench/simd_option.hpp"

using namespace roundscope;
using Clock = std::chrono::steady_clock;

namespace {

void drop_page_cache() {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double read_all(const std::string& path) {
    const auto start = Clock::now();
    const int fd = ::open(path.c_str(), O_RDONLY);
    std::vector<char> buffer(16 << 20);
    std::size_t total = 0;
    for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) total += static_cast<std::size_t>(n);
    ::close(fd);
    if (total == 0) std::fprintf(stderr, "empty file\n");
    return seconds_since(start);
}

double inspect_all(const std::string& path, int threads) {
    const auto start = Clock::now();
    const TensorFile f = read_tensor_file(path);
    double sink = 0;
    for (const Tensor& t : f.tensors) sink += analysis::tensor_stats(t, threads).count;
    if (sink < 0) std::puts("");
    return seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
    bench::apply_simd_option(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_inspect FILE.safetensors [--cold] [--threads N]\n");
        return 2;
    }
    const std::string path = argv[1];
    bool cold = false;
    int threads = 0;
    for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--cold") == 0) cold = true;
        if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    }
    std::ifstream size_probe(path, std::ios::binary | std::ios::ate);
    const double gib = static_cast<double>(size_probe.tellg()) / (1 << 30);
    std::printf("%s: %.2f GiB, %s page cache, %d threads (best of 3)\n", path.c_str(), gib, cold ? "cold" : "warm",
                resolve_threads(threads));
    double best_read = 1e30, best_inspect = 1e30;
    for (int run = 0; run < 3; ++run) {
        if (cold) drop_page_cache();
        best_read = std::min(best_read, read_all(path));
        if (cold) drop_page_cache();
        best_inspect = std::min(best_inspect, inspect_all(path, threads));
    }
    std::printf("%-28s %8.3f s %8.2f GiB/s\n", "read(2) of the file", best_read, gib / best_read);
    std::printf("%-28s %8.3f s %8.2f GiB/s   %.2fx the read speed\n", "inspect (tensor_stats)", best_inspect,
                gib / best_inspect, best_read / best_inspect);
    return 0;
}
