#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "lib/bit_packing.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/safetensors.hpp"

namespace roundscope {
namespace {

using json = nlohmann::json;

// How one tensor is stored: its safetensors dtype and its bytes there.
struct Stored {
    const Tensor* tensor;
    std::string_view dtype;
    bool as_bit_patterns;  // U8 with roundscope.format.<name> in the metadata
    int alignment;         // bytes of one element in the file (1 for packed)
};

Stored storage_of(const Tensor& t) {
    const DTypeInfo& d = info(t.dtype());
    const bool whole_bytes = t.size() * d.safetensors_bits % 8 == 0;
    if (d.safetensors.empty() || !whole_bytes) return {&t, "U8", true, 1};
    return {&t, d.safetensors, false, std::max(1, d.safetensors_bits / 8)};
}

// Packed F4/F6 data is made here; everything else is written from the tensor's own bytes.
struct Prepared {
    std::vector<std::byte> header;  // length prefix and padded JSON
    std::vector<std::vector<std::byte>> packed;
    std::vector<std::span<const std::byte>> data;
};

Prepared prepare(std::span<const Tensor> tensors, const std::map<std::string, std::string>& metadata) {
    std::vector<Stored> stored;
    std::set<std::string> names;
    for (const Tensor& t : tensors) {
        if (t.name().empty() || t.name() == "__metadata__")
            throw Error("tensor name '" + printable(t.name()) + "' cannot be stored in safetensors");
        if (!names.insert(t.name()).second) throw Error("tensor '" + printable(t.name()) + "' given twice");
        stored.push_back(storage_of(t));
    }
    // Widest elements first, then by name, as safetensors itself writes: every tensor's data
    // then starts at a multiple of its element size (the header is padded to 8 bytes).
    std::sort(stored.begin(), stored.end(), [](const Stored& a, const Stored& b) {
        return a.alignment != b.alignment ? a.alignment > b.alignment : a.tensor->name() < b.tensor->name();
    });

    Prepared p;
    p.packed.reserve(stored.size());
    json header = json::object();
    json meta = json::object();
    for (const auto& [k, v] : metadata)
        if (!k.starts_with("roundscope.format.")) meta[k] = v;
    std::uint64_t offset = 0;
    for (const Stored& s : stored) {
        const int bits = info(s.tensor->dtype()).safetensors_bits;
        if (!s.as_bit_patterns && bits < 8) {
            p.packed.push_back(pack_bits(s.tensor->bytes(), bits));
            p.data.push_back(p.packed.back());
        } else {
            p.data.push_back(s.tensor->bytes());
        }
        header[s.tensor->name()] = {{"dtype", s.dtype},
                                    {"shape", s.tensor->shape()},
                                    {"data_offsets", {offset, offset + p.data.back().size()}}};
        offset += p.data.back().size();
        if (s.as_bit_patterns) meta["roundscope.format." + s.tensor->name()] = std::string(name(s.tensor->dtype()));
    }
    if (!meta.empty()) header["__metadata__"] = meta;

    std::string text;
    try {
        text = header.dump();
    } catch (const json::exception& e) {
        throw Error(std::string("cannot write the safetensors header (names and metadata must be UTF-8): ") + e.what());
    }
    text.resize((text.size() + 7) / 8 * 8, ' ');
    if (text.size() > safetensors_max_header) throw Error("safetensors header over 100 MB");
    p.header.resize(8 + text.size());
    const std::uint64_t n = text.size();
    std::memcpy(p.header.data(), &n, 8);
    std::memcpy(p.header.data() + 8, text.data(), text.size());
    return p;
}

}  // namespace

std::vector<std::byte> serialize_safetensors(std::span<const Tensor> tensors,
                                             const std::map<std::string, std::string>& metadata) {
    const Prepared p = prepare(tensors, metadata);
    std::vector<std::byte> out = p.header;
    for (const auto& d : p.data) out.insert(out.end(), d.begin(), d.end());
    return out;
}

void write_safetensors(const std::string& path, std::span<const Tensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
    Prepared p;
    try {
        p = prepare(tensors, metadata);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    std::vector<std::span<const std::byte>> parts{p.header};
    parts.insert(parts.end(), p.data.begin(), p.data.end());
    write_file(path, parts);
}

}  // namespace roundscope
