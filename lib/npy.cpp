#include "lib/npy.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/mapped_file.hpp"
#include "lib/npy_header.hpp"

namespace roundscope {
namespace {

constexpr char magic[] = "\x93NUMPY";
constexpr std::size_t magic_size = 6;

struct Descr {
    char byte_order;             // '<', '>', '|' or '='
    std::optional<DType> dtype;  // nullopt for opaque (ml_dtypes) types
    int itemsize;
};

Descr parse_descr(const std::string& d, const std::string& label) {
    auto bad = [&](const std::string& why) -> Descr {
        throw Error(label + ": unsupported descr '" + printable(d) + "'" + why);
    };
    if (d.size() < 3 || std::string_view("<>|=").find(d[0]) == std::string_view::npos) return bad("");
    const std::string kind_size = d.substr(1);
    int size = 0;
    for (char c : kind_size.substr(1)) {
        if (c < '0' || c > '9' || size > 1000) return bad("");
        size = size * 10 + (c - '0');
    }
    if (size == 0) return bad("");
    if (kind_size[0] == 'V' || kind_size == "f1") return {d[0], std::nullopt, size};
    for (const DTypeInfo& t : all_dtypes())
        if (!t.numpy.empty() && t.numpy == kind_size) return {d[0], t.dtype, size};
    return bad(" (roundscope reads bool, integer and float arrays)");
}

// Copies `data` (item `size` bytes, big-endian) into little-endian order.
std::vector<std::byte> swapped(std::span<const std::byte> data, int size) {
    std::vector<std::byte> out(data.begin(), data.end());
    for (std::size_t i = 0; i < out.size(); i += size) std::reverse(out.begin() + i, out.begin() + i + size);
    return out;
}

// Fortran-order items -> C order.
std::vector<std::byte> to_c_order(std::span<const std::byte> data, const Shape& shape, int size) {
    std::vector<std::byte> out(data.size());
    const std::size_t rank = shape.size();
    std::vector<std::uint64_t> index(rank, 0), stride(rank, 1);
    for (std::size_t j = 1; j < rank; ++j) stride[j] = stride[j - 1] * shape[j - 1];
    const std::uint64_t count = out.size() / size;
    std::uint64_t from = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        std::memcpy(out.data() + i * size, data.data() + from * size, size);
        for (std::size_t j = rank; j-- > 0;) {  // odometer, last index fastest
            if (++index[j] < shape[j]) {
                from += stride[j];
                break;
            }
            from -= stride[j] * (shape[j] - 1);
            index[j] = 0;
        }
    }
    return out;
}

}  // namespace

Tensor parse_npy(std::span<const std::byte> file, const std::string& label, std::string tensor_name,
                 std::shared_ptr<const void> owner, std::optional<DType> dtype, std::string_view dtype_option) {
    if (file.size() < magic_size + 4 || std::memcmp(file.data(), magic, magic_size) != 0)
        throw Error(label + ": not an .npy file (bad magic)");
    const auto major = static_cast<unsigned>(file[6]), minor = static_cast<unsigned>(file[7]);
    if (major < 1 || major > 3 || minor != 0)
        throw Error(label + ": unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
    const std::size_t length_bytes = major == 1 ? 2 : 4;
    std::uint32_t header_length = 0;
    if (file.size() < 8 + length_bytes) throw Error(label + ": truncated .npy header");
    std::memcpy(&header_length, file.data() + 8, length_bytes);
    const std::size_t data_start = 8 + length_bytes + header_length;
    if (data_start > file.size())
        throw Error(label + ": truncated: .npy header length " + std::to_string(header_length) +
                    " runs past the end of the file");
    std::string_view text(reinterpret_cast<const char*>(file.data()) + 8 + length_bytes, header_length);
    if (text.empty() || text.back() != '\n') throw Error(label + ": bad .npy header: it does not end with a newline");
    const detail::NpyHeader header = detail::parse_npy_header(text, label);

    const Descr descr = parse_descr(header.descr, label);
    DType t;
    if (dtype) {
        if (info(*dtype).storage_bytes != descr.itemsize)
            throw Error(label + ": " + std::string(dtype_option) + " " + std::string(name(*dtype)) + " takes " +
                        std::to_string(info(*dtype).storage_bytes) + " bytes per element but descr '" +
                        printable(header.descr) + "' has " + std::to_string(descr.itemsize));
        t = *dtype;
    } else if (!descr.dtype) {
        throw Error(label + ": descr '" + printable(header.descr) +
                    "' is opaque (numpy saves ml_dtypes types such as bfloat16 or float8_e4m3fn this way): "
                    "give the element type with " +
                    std::string(dtype_option) + " (for example bf16 or e4m3)");
    } else {
        t = *descr.dtype;
        if (info(t).storage_bytes != descr.itemsize)
            throw Error(label + ": unsupported descr '" + printable(header.descr) + "'");
    }

    const auto count = element_count(header.shape);
    const std::uint64_t available = file.size() - data_start;
    if (!count || *count > available / descr.itemsize || *count * descr.itemsize != available)
        throw Error(label + ": shape " + shape_string(header.shape) + " of descr '" + printable(header.descr) +
                    "' needs " +
                    (count ? std::to_string(*count * descr.itemsize) + " bytes" : std::string("too many bytes")) +
                    " of data but the file has " + std::to_string(available));
    const std::span<const std::byte> data = file.subspan(data_start);

    const bool swap = descr.byte_order == '>' && descr.itemsize > 1;
    Tensor out;
    if (!swap && (!header.fortran_order || header.shape.size() < 2)) {
        out = Tensor::view(std::move(tensor_name), t, header.shape, data, std::move(owner));
    } else {
        std::vector<std::byte> bytes =
            swap ? swapped(data, descr.itemsize) : std::vector<std::byte>(data.begin(), data.end());
        if (header.fortran_order && header.shape.size() >= 2) bytes = to_c_order(bytes, header.shape, descr.itemsize);
        out = Tensor(std::move(tensor_name), t, header.shape, std::move(bytes));
    }
    const int bits = info(t).value_bits;
    if (bits < 8)
        for (std::uint64_t i = 0; i < out.size(); ++i)
            if (out.bits_at(i) >> bits)
                throw Error(label + ": element " + std::to_string(i) + " has bits set above the " +
                            std::to_string(bits) + "-bit format " + std::string(name(t)));
    return out;
}

Tensor read_npy(const std::string& path, std::optional<DType> dtype, std::string_view dtype_option, FileAccess access) {
    const auto file = MappedFile::open(path, access);
    return parse_npy(file->bytes(), path, std::filesystem::path(path).stem().string(), file, dtype, dtype_option);
}

namespace {

std::string header_text(const Tensor& t) {
    const DTypeInfo& d = info(t.dtype());
    const std::string size = std::to_string(d.storage_bytes);
    const char order = d.storage_bytes == 1 ? '|' : '<';
    const std::string descr = order + (d.numpy.empty() ? "V" + size : std::string(d.numpy));
    std::string shape = "(";
    for (std::size_t i = 0; i < t.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
    if (t.shape().size() == 1) shape += ",";
    shape += ")";
    return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::vector<std::byte> header_bytes(const Tensor& t) {
    std::string text = header_text(t);
    // numpy pads so that the data starts at a multiple of 64 bytes (numpy/lib/format.py, ARRAY_ALIGN).
    const bool v1 = text.size() + 1 + 10 < 65536;
    const std::size_t prefix = v1 ? 10 : 12;
    text.resize((prefix + text.size() + 1 + 63) / 64 * 64 - prefix - 1, ' ');
    text += '\n';
    std::vector<std::byte> out(prefix);
    std::memcpy(out.data(), magic, magic_size);
    out[6] = std::byte{static_cast<unsigned char>(v1 ? 1 : 2)};
    out[7] = std::byte{0};
    const std::uint32_t n = static_cast<std::uint32_t>(text.size());
    std::memcpy(out.data() + 8, &n, prefix - 8);
    const auto* h = reinterpret_cast<const std::byte*>(text.data());
    out.insert(out.end(), h, h + text.size());
    return out;
}

}  // namespace

std::vector<std::byte> serialize_npy(const Tensor& t) {
    std::vector<std::byte> out = header_bytes(t);
    out.insert(out.end(), t.bytes().begin(), t.bytes().end());
    return out;
}

void write_npy(const std::string& path, const Tensor& t) {
    const std::vector<std::byte> header = header_bytes(t);
    const std::span<const std::byte> parts[] = {header, t.bytes()};
    write_file(path, parts);
}

}  // namespace roundscope
