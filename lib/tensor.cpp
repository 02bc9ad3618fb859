#include "lib/tensor.hpp"

#include <bit>
#include <cstring>
#include <limits>

#include "lib/error.hpp"

namespace roundscope {

static_assert(std::endian::native == std::endian::little, "tensor bytes are little-endian in memory and on disk");

std::optional<std::uint64_t> element_count(const Shape& shape) {
    std::uint64_t n = 1;
    constexpr std::uint64_t limit = std::numeric_limits<std::int64_t>::max();
    for (std::uint64_t d : shape) {
        if (d != 0 && n > limit / d) return std::nullopt;
        n *= d;
    }
    return n;
}

std::string shape_string(const Shape& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

namespace {
std::uint64_t checked_byte_count(const std::string& name, DType dtype, const Shape& shape) {
    const auto n = element_count(shape);
    const auto unit = static_cast<std::uint64_t>(info(dtype).storage_bytes);
    if (!n || *n > std::numeric_limits<std::uint64_t>::max() / 8 / unit)
        throw Error("tensor '" + name + "': shape " + shape_string(shape) + " has too many elements");
    return *n * unit;
}
}  // namespace

Tensor::Tensor(std::string name, DType dtype, Shape shape, std::vector<std::byte> bytes)
    : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)) {
    const std::uint64_t want = checked_byte_count(name_, dtype_, shape_);
    if (bytes.size() != want)
        throw Error("tensor '" + name_ + "': " + std::to_string(bytes.size()) + " bytes for shape " +
                    shape_string(shape_) + " of " + std::string(roundscope::name(dtype_)) + " (needs " +
                    std::to_string(want) + ")");
    size_ = *element_count(shape_);
    owned_ = std::make_shared<std::vector<std::byte>>(std::move(bytes));
    owner_ = owned_;
    bytes_ = *owned_;
}

Tensor Tensor::zeros(std::string name, DType dtype, Shape shape) {
    const std::uint64_t want = checked_byte_count(name, dtype, shape);
    return Tensor(std::move(name), dtype, std::move(shape), std::vector<std::byte>(want));
}

Tensor Tensor::view(std::string name, DType dtype, Shape shape, std::span<const std::byte> bytes,
                    std::shared_ptr<const void> owner) {
    const std::uint64_t want = checked_byte_count(name, dtype, shape);
    if (bytes.size() != want)
        throw Error("tensor '" + name + "': " + std::to_string(bytes.size()) + " bytes for shape " +
                    shape_string(shape) + " (needs " + std::to_string(want) + ")");
    Tensor t;
    t.name_ = std::move(name);
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.size_ = *element_count(t.shape_);
    t.owner_ = std::move(owner);
    t.bytes_ = bytes;
    return t;
}

std::span<std::byte> Tensor::mutable_bytes() {
    if (!owned_) throw Error("tensor '" + name_ + "' is a read-only view of a file");
    return *owned_;
}

std::uint64_t Tensor::bits_at(std::uint64_t i) const {
    const int unit = info(dtype_).storage_bytes;
    std::uint64_t bits = 0;
    std::memcpy(&bits, bytes_.data() + i * unit, unit);
    return bits;
}

void Tensor::set_bits_at(std::uint64_t i, std::uint64_t bits) {
    const int unit = info(dtype_).storage_bytes;
    std::memcpy(mutable_bytes().data() + i * unit, &bits, unit);
}

const Tensor* TensorFile::find(std::string_view name) const {
    for (const Tensor& t : tensors)
        if (t.name() == name) return &t;
    return nullptr;
}

const Tensor& TensorFile::get(std::string_view name) const {
    if (const Tensor* t = find(name)) return *t;
    std::string names;
    for (const Tensor& t : tensors) names += (names.empty() ? "" : ", ") + t.name();
    throw Error(path + ": no tensor '" + std::string(name) + "' (tensors: " + (names.empty() ? "none" : names) + ")");
}

}  // namespace roundscope
