#pragma once
// A tensor: a name, a dtype, a shape and its elements' bytes in C order, little-endian, one
// storage unit per element (sub-byte formats take one byte each, value in the low bits). The
// bytes are owned, or a zero-copy view into a memory-mapped file kept alive by the tensor.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "lib/dtype.hpp"

namespace roundscope {

using Shape = std::vector<std::uint64_t>;

/// Product of the dimensions; nullopt if it does not fit in 63 bits.
std::optional<std::uint64_t> element_count(const Shape& shape);
/// "[2, 3, 4]".
std::string shape_string(const Shape& shape);

class Tensor {
public:
    Tensor() = default;
    /// Owns `bytes`, which must hold element_count(shape) * storage_bytes elements.
    Tensor(std::string name, DType dtype, Shape shape, std::vector<std::byte> bytes);
    /// All-zero bytes.
    static Tensor zeros(std::string name, DType dtype, Shape shape);
    /// Element i holds values[i]'s bit pattern: integers as they are, float and double by
    /// their IEEE encoding (for F32 / F64 tensors).
    template <class T>
    static Tensor of_bits(std::string name, DType dtype, Shape shape, const std::vector<T>& values) {
        Tensor t = zeros(std::move(name), dtype, std::move(shape));
        for (std::size_t i = 0; i < values.size(); ++i) {
            if constexpr (std::is_same_v<T, float>)
                t.set_bits_at(i, std::bit_cast<std::uint32_t>(values[i]));
            else if constexpr (std::is_same_v<T, double>)
                t.set_bits_at(i, std::bit_cast<std::uint64_t>(values[i]));
            else
                t.set_bits_at(i, values[i]);
        }
        return t;
    }
    /// Views `bytes`, which `owner` keeps alive (a mapped file, a buffer).
    static Tensor view(std::string name, DType dtype, Shape shape, std::span<const std::byte> bytes,
                       std::shared_ptr<const void> owner);

    const std::string& name() const { return name_; }
    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    std::uint64_t size() const { return size_; }
    std::span<const std::byte> bytes() const { return bytes_; }
    /// Writable bytes; only an owning tensor has them (an Error otherwise).
    std::span<std::byte> mutable_bytes();
    bool is_view() const { return !owned_; }

    /// The bit pattern of element i (little-endian storage unit), zero-extended.
    std::uint64_t bits_at(std::uint64_t i) const;
    void set_bits_at(std::uint64_t i, std::uint64_t bits);

    void rename(std::string name) { name_ = std::move(name); }

private:
    std::string name_;
    DType dtype_ = DType::u8;
    Shape shape_;
    std::uint64_t size_ = 0;
    std::shared_ptr<std::vector<std::byte>> owned_;
    std::shared_ptr<const void> owner_;
    std::span<const std::byte> bytes_;
};

/// The tensors of one file, in file order, and its string metadata.
struct TensorFile {
    std::string path;
    std::map<std::string, std::string> metadata;
    std::vector<Tensor> tensors;

    const Tensor* find(std::string_view name) const;
    /// The named tensor; an Error naming the file and listing its tensors otherwise.
    const Tensor& get(std::string_view name) const;
};

}  // namespace roundscope
