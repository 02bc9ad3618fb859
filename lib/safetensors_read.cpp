#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "lib/bit_packing.hpp"
#include "lib/error.hpp"
#include "lib/mapped_file.hpp"
#include "lib/safetensors.hpp"

namespace roundscope {
namespace {

using json = nlohmann::json;

constexpr std::string_view format_key_prefix = "roundscope.format.";

struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::uint64_t count;
    std::uint64_t begin, end;
};

class HeaderReader {
public:
    HeaderReader(std::string label) : label_(std::move(label)) {}

    [[noreturn]] void fail(const std::string& what) const { throw Error(label_ + ": " + what); }
    [[noreturn]] void fail_tensor(const std::string& name, const std::string& what) const {
        fail("tensor '" + printable(name) + "': " + what);
    }

    // Parses the JSON, rejecting duplicate keys (nlohmann keeps the last) and deep nesting.
    json parse(std::string_view text) {
        std::vector<std::set<std::string>> keys;
        auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
            if (depth > 4) fail("header JSON nests deeper than a safetensors header can");
            switch (event) {
                case json::parse_event_t::object_start:
                    keys.emplace_back();
                    break;
                case json::parse_event_t::object_end:
                    keys.pop_back();
                    break;
                case json::parse_event_t::key:
                    if (!keys.back().insert(parsed.get<std::string>()).second)
                        fail("header has the key '" + printable(parsed.get<std::string>()) + "' twice");
                    break;
                default:
                    break;
            }
            return true;
        };
        try {
            return json::parse(text.begin(), text.end(), callback);
        } catch (const json::exception& e) {
            fail("invalid JSON header: " + printable(e.what(), 200));
        }
    }

    std::uint64_t unsigned_value(const json& v, const std::string& name, const char* field) const {
        if (!v.is_number_unsigned()) fail_tensor(name, std::string(field) + " must hold non-negative integers");
        return v.get<std::uint64_t>();
    }

    Entry entry(const std::string& name, const json& v) const {
        if (name.empty()) fail("a tensor has an empty name");
        if (!v.is_object()) fail_tensor(name, "header entry is not an object");
        for (const auto& [key, _] : v.items())
            if (key != "dtype" && key != "shape" && key != "data_offsets")
                fail_tensor(name, "unknown header field '" + printable(key) + "'");
        if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
            fail_tensor(name, "header entry needs dtype, shape and data_offsets");
        const json& dtype = v["dtype"];
        if (!dtype.is_string()) fail_tensor(name, "dtype is not a string");
        const auto t = find_safetensors_dtype(dtype.get<std::string>());
        if (!t) fail_tensor(name, "unknown dtype '" + printable(dtype.get<std::string>()) + "'");
        Entry e{name, *t, {}, 0, 0, 0};
        if (!v["shape"].is_array()) fail_tensor(name, "shape is not an array");
        for (const json& d : v["shape"]) e.shape.push_back(unsigned_value(d, name, "shape"));
        const json& offsets = v["data_offsets"];
        if (!offsets.is_array() || offsets.size() != 2) fail_tensor(name, "data_offsets is not [begin, end]");
        e.begin = unsigned_value(offsets[0], name, "data_offsets");
        e.end = unsigned_value(offsets[1], name, "data_offsets");
        if (e.begin > e.end) fail_tensor(name, "data_offsets begin after they end");
        const auto count = element_count(e.shape);
        const auto bits = static_cast<std::uint64_t>(info(*t).safetensors_bits);
        if (!count || *count > ~std::uint64_t{0} / bits)
            fail_tensor(name, "shape " + shape_string(e.shape) + " has more elements than fit in 63 bits");
        e.count = *count;
        if (e.count * bits % 8 != 0)
            fail_tensor(name, std::to_string(e.count) + " elements of " + std::string(info(*t).safetensors) +
                                  " do not fill whole bytes");
        if (e.count * bits / 8 != e.end - e.begin)
            fail_tensor(name, "shape " + shape_string(e.shape) + " of " + std::string(info(*t).safetensors) +
                                  " needs " + std::to_string(e.count * bits / 8) + " bytes but data_offsets give " +
                                  std::to_string(e.end - e.begin));
        return e;
    }

    // The byte ranges must tile [0, buffer) exactly, as safetensors requires.
    void check_layout(std::vector<Entry>& entries, std::uint64_t buffer) const {
        std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        });
        std::uint64_t at = 0;
        const Entry* previous = nullptr;
        for (const Entry& e : entries) {
            if (e.end > buffer)
                fail_tensor(e.name, "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                        "] run past the byte buffer (" + std::to_string(buffer) + " bytes)");
            if (e.begin < at) fail_tensor(e.name, "data overlaps tensor '" + printable(previous->name) + "'");
            if (e.begin > at)
                fail_tensor(e.name, "a hole of " + std::to_string(e.begin - at) + " bytes precedes its data");
            at = e.end;
            previous = &e;
        }
        if (at != buffer) fail(std::to_string(buffer - at) + " bytes after the last tensor belong to no tensor");
    }

    std::string label_;
};

// Reinterprets a U8 tensor as the format its roundscope.format.<name> metadata names.
DType declared_format(const HeaderReader& r, const std::map<std::string, std::string>& metadata, const Entry& e) {
    const auto it = metadata.find(std::string(format_key_prefix) + e.name);
    if (it == metadata.end()) return e.dtype;
    const auto t = find_dtype(it->second);
    if (!t || !is_floating(*t) || info(*t).storage_bytes != 1)
        r.fail_tensor(e.name, "metadata names an unknown one-byte format '" + printable(it->second) + "'");
    if (e.dtype != DType::u8) r.fail_tensor(e.name, "metadata gives a format but the dtype is not U8");
    return *t;
}

void check_value_bits(const HeaderReader& r, const Tensor& t) {
    const int bits = info(t.dtype()).value_bits;
    if (bits >= 8) return;
    const auto bytes = t.bytes();
    for (std::uint64_t i = 0; i < bytes.size(); ++i)
        if (static_cast<unsigned>(bytes[i]) >> bits)
            r.fail_tensor(t.name(), "element " + std::to_string(i) + " has bits set above the " + std::to_string(bits) +
                                        "-bit format");
}

}  // namespace

TensorFile parse_safetensors(std::span<const std::byte> file, const std::string& label,
                             std::shared_ptr<const void> owner) {
    HeaderReader r(label);
    if (file.size() < 8)
        r.fail("truncated: " + std::to_string(file.size()) + " bytes, shorter than the 8-byte header length");
    std::uint64_t n = 0;
    std::memcpy(&n, file.data(), 8);
    if (n > safetensors_max_header) r.fail("header length " + std::to_string(n) + " is over the 100 MB limit");
    if (n > file.size() - 8)
        r.fail("truncated: header length " + std::to_string(n) + " runs past the end of the file (" +
               std::to_string(file.size()) + " bytes)");
    const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, n);
    const json header = r.parse(text);
    if (!header.is_object()) r.fail("header is not a JSON object");

    TensorFile out;
    out.path = label;
    std::vector<Entry> entries;
    for (const auto& [key, value] : header.items()) {
        if (key == "__metadata__") {
            if (!value.is_object()) r.fail("__metadata__ is not an object");
            for (const auto& [k, v] : value.items()) {
                if (!v.is_string()) r.fail("__metadata__ value of '" + printable(k) + "' is not a string");
                out.metadata[k] = v.get<std::string>();
            }
        } else {
            entries.push_back(r.entry(key, value));
        }
    }
    const std::span<const std::byte> buffer = file.subspan(8 + n);
    r.check_layout(entries, buffer.size());

    for (const Entry& e : entries) {
        const std::span<const std::byte> data = buffer.subspan(e.begin, e.end - e.begin);
        const DTypeInfo& d = info(e.dtype);
        if (d.safetensors_bits < 8) {
            out.tensors.emplace_back(e.name, e.dtype, e.shape, unpack_bits(data, e.count, d.safetensors_bits));
        } else {
            const DType as = declared_format(r, out.metadata, e);
            out.tensors.push_back(Tensor::view(e.name, as, e.shape, data, owner));
            check_value_bits(r, out.tensors.back());
        }
    }
    for (const auto& [key, value] : out.metadata)
        if (key.starts_with(format_key_prefix) && !out.find(key.substr(format_key_prefix.size())))
            r.fail("__metadata__ gives a format for '" + printable(key.substr(format_key_prefix.size())) +
                   "', which is not a tensor of the file");
    return out;
}

TensorFile read_safetensors(const std::string& path, FileAccess access) {
    const auto file = MappedFile::open(path, access);
    return parse_safetensors(file->bytes(), path, file);
}

}  // namespace roundscope
