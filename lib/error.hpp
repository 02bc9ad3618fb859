#pragma once
// The one error type of roundscope. Its message names the file, tensor or option at fault;
// the CLI prints it as `roundscope: error: <message>` and exits with code 2.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace roundscope {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An Error the operating system reported on a file (it cannot be opened, mapped, created or
/// written); the Python package raises it as OSError, every other Error as ValueError.
class FileError : public Error {
public:
    using Error::Error;
};

/// An Error about one tensor: "FILE: tensor 'NAME' DETAIL" (FILE empty: "tensor 'NAME' DETAIL").
/// It keeps its parts, so that a front end whose caller handed the tensors over as arguments of
/// its own (Python's q, k, v, attn_mask) can name the argument instead: "NAME: DETAIL".
class TensorError : public Error {
public:
    TensorError(std::string file, std::string tensor, std::string detail)
        : Error((file.empty() ? "" : file + ": ") + "tensor '" + tensor + "' " + detail),
          file_(std::move(file)),
          tensor_(std::move(tensor)),
          detail_(std::move(detail)) {}
    const std::string& file() const noexcept { return file_; }
    const std::string& tensor() const noexcept { return tensor_; }
    const std::string& detail() const noexcept { return detail_; }

private:
    std::string file_, tensor_, detail_;
};

/// Text from an untrusted file made safe for a terminal, whole: control characters (C0, DEL and
/// C1, which can start an escape sequence) and bytes that are not UTF-8 become \xNN; other
/// UTF-8 text stays as it is.
inline std::string terminal_text(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    auto escape = [&](unsigned char c) {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
    };
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c), ++i;
            continue;
        }
        // a whole UTF-8 sequence of 2 to 4 bytes, not a C1 control (U+0080 to U+009F)
        const std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool whole = n > 0 && i + n <= s.size() && !(c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0);
        for (std::size_t k = 1; whole && k < n; ++k) whole = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
        if (whole) {
            out.append(s.substr(i, n)), i += n;
            continue;
        }
        escape(c), ++i;
    }
    return out;
}

/// Text from an untrusted file made safe for a one-line message: bytes outside printable
/// ASCII become \xNN, and anything past `max_chars` becomes "...".
inline std::string printable(std::string_view s, std::size_t max_chars = 80) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (out.size() >= max_chars) return out + "...";
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

}  // namespace roundscope
