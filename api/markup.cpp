#include "api/markup.hpp"

namespace roundscope::api {

namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 where the byte there starts none.
std::size_t utf8_length(std::string_view text, std::size_t i) {
    const auto byte = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
    const unsigned c = byte(0);
    const auto tail = [&](std::size_t k) { return (byte(k) & 0xc0u) == 0x80u; };
    if (c >= 0xc2 && c <= 0xdf) return tail(1) ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        const unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return byte(1) >= lo && byte(1) <= hi && tail(2) ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        const unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return byte(1) >= lo && byte(1) <= hi && tail(2) && tail(3) ? 4 : 0;
    }
    return 0;
}

}  // namespace

std::string markup_escaped(std::string_view text) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x80) {  // UTF-8 kept as it is; any other byte (a file name need not be UTF-8) as \xNN
            if (const std::size_t n = utf8_length(text, i); n > 0) {
                out.append(text.substr(i, n));
                i += n - 1;
            } else {
                out += "\\x";
                out += hex[c >> 4];
                out += hex[c & 15];
            }
            continue;
        }
        switch (ch) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&apos;";
                break;
            default:
                if ((c < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || c == 0x7f) {
                    out += "\\x";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += ch;
                }
        }
    }
    return out;
}

}  // namespace roundscope::api
