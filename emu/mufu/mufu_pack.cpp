#include "emu/mufu/mufu_pack.hpp"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <sstream>

#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

constexpr char magic[8] = {'R', 'S', 'M', 'U', 'F', 'U', '0', '2'};

void put_u32(std::vector<unsigned char>& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

void put_text(std::vector<unsigned char>& out, const std::string& text) {
    put_u32(out, static_cast<std::uint32_t>(text.size()));
    out.insert(out.end(), text.begin(), text.end());
}

std::string lines(const std::map<std::string, std::string>& kv) {
    std::string s;
    for (const auto& [k, v] : kv) s += k + "=" + v + "\n";
    return s;
}

std::map<std::string, std::string> parse_lines(const std::string& text) {
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) throw Error("MUFU pack: a parameter line without '=': '" + line + "'");
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

// A table as its first differences, zigzag-coded LEB128 varints (an exp2 table steps by 0 to 3,
// one byte each), deflated.
void put_table(std::vector<unsigned char>& out, const std::vector<std::uint32_t>& table) {
    std::vector<unsigned char> raw;
    raw.reserve(table.size() + 64);
    std::int64_t previous = 0;
    for (const std::uint32_t entry : table) {
        const std::int64_t step = std::int64_t{entry} - previous;
        previous = entry;
        std::uint64_t z = (static_cast<std::uint64_t>(step) << 1) ^ static_cast<std::uint64_t>(step >> 63);
        for (; z >= 0x80; z >>= 7) raw.push_back(static_cast<unsigned char>((z & 0x7F) | 0x80));
        raw.push_back(static_cast<unsigned char>(z));
    }
    uLongf bytes = compressBound(static_cast<uLong>(raw.size()));
    std::vector<unsigned char> z(bytes);
    if (compress2(z.data(), &bytes, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK)
        throw Error("MUFU pack: zlib could not compress a table");
    put_u32(out, static_cast<std::uint32_t>(table.size()));
    put_u32(out, static_cast<std::uint32_t>(raw.size()));
    put_u32(out, static_cast<std::uint32_t>(bytes));
    out.insert(out.end(), z.begin(), z.begin() + static_cast<std::ptrdiff_t>(bytes));
}

struct Reader {
    const unsigned char* p;
    std::size_t left;

    void need(std::size_t n, const char* what) const {
        if (left < n) throw Error(std::string("MUFU pack: truncated (") + what + ")");
    }
    std::uint32_t u32(const char* what) {
        need(4, what);
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= std::uint32_t{p[i]} << (8 * i);
        p += 4, left -= 4;
        return v;
    }
    std::string text(const char* what) {
        const std::uint32_t n = u32(what);
        need(n, what);
        std::string s(reinterpret_cast<const char*>(p), n);
        p += n, left -= n;
        return s;
    }
    std::vector<std::uint32_t> table() {
        const std::uint32_t entries = u32("a table's size"), raw_bytes = u32("a table's size"),
                            bytes = u32("a table's size");
        if (entries > (1u << 24) || raw_bytes > 10u * entries)
            throw Error("MUFU pack: a table of more than 2^24 entries or 10 bytes an entry");
        need(bytes, "a table");
        std::vector<unsigned char> raw(raw_bytes);
        uLongf got = static_cast<uLongf>(raw.size());
        if (uncompress(raw.data(), &got, p, bytes) != Z_OK || got != raw.size())
            throw Error("MUFU pack: a table's zlib stream is corrupt");
        p += bytes, left -= bytes;
        std::vector<std::uint32_t> t(entries);
        std::size_t at = 0;
        std::int64_t value = 0;
        for (std::size_t i = 0; i < entries; ++i) {
            std::uint64_t z = 0;
            for (int shift = 0;; shift += 7) {
                if (at == raw.size() || shift > 63) throw Error("MUFU pack: a table's differences are cut short");
                const unsigned char b = raw[at++];
                z |= std::uint64_t{b & 0x7Fu} << shift;
                if ((b & 0x80) == 0) break;
            }
            value += static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
            if (value < 0 || value > 0xFFFFFFFF) throw Error("MUFU pack: a table entry beyond 32 bits");
            t[i] = static_cast<std::uint32_t>(value);
        }
        if (at != raw.size()) throw Error("MUFU pack: a table's differences run past its entries");
        return t;
    }
};

std::uint32_t number(const std::map<std::string, std::string>& kv, const std::string& key) {
    const auto it = kv.find(key);
    if (it == kv.end()) throw Error("MUFU pack: a model without '" + key + "'");
    try {
        return static_cast<std::uint32_t>(std::stoul(it->second));
    } catch (const std::exception&) {
        throw Error("MUFU pack: '" + key + "' is not a number");
    }
}

}  // namespace

std::vector<unsigned char> pack_mufu_models(const MufuPack& pack) {
    std::vector<unsigned char> out(magic, magic + sizeof magic);
    put_u32(out, static_cast<std::uint32_t>(pack.models.size()));
    put_text(out, lines(pack.provenance));
    for (const MufuModel& m : pack.models) {
        put_text(out, lines({{"variant", std::string(mufu_ptx(m.variant))},
                             {"rounding", std::string(fixed_rounding_name(m.rounding))},
                             {"fraction_bits", std::to_string(m.fraction_bits)},
                             {"split", std::to_string(m.split)},
                             {"beyond", m.beyond ? "1" : "0"},
                             {"at_one", std::to_string(m.at_one)},
                             {"canonical_nan", m.canonical_nan ? "1" : "0"}}));
        put_u32(out, m.table_positive.empty() ? 1 : 2);
        put_table(out, m.table);
        if (!m.table_positive.empty()) put_table(out, m.table_positive);
    }
    return out;
}

MufuPack unpack_mufu_models(const unsigned char* data, std::size_t size) {
    if (size < sizeof magic || std::memcmp(data, magic, sizeof magic) != 0)
        throw Error("MUFU pack: not a pack of MUFU models (bad magic)");
    Reader r{data + sizeof magic, size - sizeof magic};
    MufuPack pack;
    const std::uint32_t n = r.u32("the model count");
    pack.provenance = parse_lines(r.text("the provenance"));
    for (std::uint32_t i = 0; i < n; ++i) {
        const auto kv = parse_lines(r.text("a model's parameters"));
        MufuModel m;
        const auto v = find_mufu_variant(kv.count("variant") ? kv.at("variant") : "");
        if (!v) throw Error("MUFU pack: a model of an unknown variant");
        m.variant = *v;
        bool known = false;
        for (const FixedRounding fr :
             {FixedRounding::floor, FixedRounding::nearest_even, FixedRounding::toward_zero, FixedRounding::ceiling})
            if (kv.count("rounding") && kv.at("rounding") == fixed_rounding_name(fr)) m.rounding = fr, known = true;
        if (!known) throw Error("MUFU pack: a model with an unknown rounding");
        m.fraction_bits = static_cast<int>(number(kv, "fraction_bits"));
        m.split = number(kv, "split");
        m.beyond = number(kv, "beyond") != 0;
        m.at_one = number(kv, "at_one");
        m.canonical_nan = number(kv, "canonical_nan") != 0;
        const std::uint32_t tables = r.u32("a model's table count");
        if (tables != 1 && tables != 2) throw Error("MUFU pack: a model with " + std::to_string(tables) + " tables");
        m.table = r.table();
        if (tables == 2) m.table_positive = r.table();
        if (m.table.size() != (1u << 23) || (tables == 2 && m.table_positive.size() != (1u << 23)))
            throw Error("MUFU pack: a table of other than 2^23 entries");
        if (m.split >= (1u << 23) || m.fraction_bits < 0 || m.fraction_bits > 24)
            throw Error("MUFU pack: a model's parameters are out of range");
        pack.models.push_back(std::move(m));
    }
    if (r.left != 0) throw Error("MUFU pack: bytes after the last model");
    return pack;
}

}  // namespace roundscope::emu
