#include "lib/npy_header.hpp"

#include <set>

#include "lib/error.hpp"

namespace roundscope::detail {
namespace {

class DictParser {
public:
    DictParser(std::string_view text, const std::string& label) : s_(text), label_(label) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(label_ + ": bad .npy header: " + what + " (header: " + printable(s_, 120) + ")");
    }

    NpyHeader parse() {
        NpyHeader h;
        std::set<std::string> seen;
        expect('{');
        while (!accept('}')) {
            const std::string key = string();
            expect(':');
            if (!seen.insert(key).second) fail("key '" + printable(key) + "' twice");
            if (key == "descr") {
                skip_space();
                if (peek() != '\'' && peek() != '"')
                    fail("descr is not a string (structured dtypes are not supported)");
                h.descr = string();
            } else if (key == "fortran_order") {
                h.fortran_order = boolean();
            } else if (key == "shape") {
                h.shape = tuple();
            } else {
                fail("unexpected key '" + printable(key) + "'");
            }
            if (!accept(',')) {
                expect('}');
                break;
            }
        }
        skip_space();
        if (pos_ != s_.size()) fail("text after the dict");
        if (seen.size() != 3) fail("needs exactly the keys descr, fortran_order and shape");
        return h;
    }

private:
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }
    char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
    bool accept(char c) {
        skip_space();
        if (peek() != c) return false;
        ++pos_;
        return true;
    }
    void expect(char c) {
        if (!accept(c)) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
    }
    std::string string() {
        skip_space();
        const char quote = peek();
        if (quote != '\'' && quote != '"') fail("expected a string at offset " + std::to_string(pos_));
        const std::size_t end = s_.find(quote, ++pos_);
        if (end == std::string_view::npos) fail("unterminated string");
        std::string out(s_.substr(pos_, end - pos_));
        if (out.find('\\') != std::string::npos) fail("escapes in strings are not supported");
        pos_ = end + 1;
        return out;
    }
    bool boolean() {
        skip_space();
        for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
            if (s_.substr(pos_, word.size()) == word) {
                pos_ += word.size();
                return value;
            }
        }
        fail("fortran_order is not True or False");
    }
    std::uint64_t integer() {
        skip_space();
        std::uint64_t v = 0;
        const std::size_t start = pos_;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            if (v > (~std::uint64_t{0} - 9) / 10) fail("dimension too large");
            v = v * 10 + static_cast<std::uint64_t>(s_[pos_++] - '0');
        }
        if (pos_ == start) fail("shape holds something other than non-negative integers");
        if (peek() == 'L') ++pos_;  // Python 2 long literals, as old numpy wrote them
        return v;
    }
    Shape tuple() {
        Shape shape;
        expect('(');
        if (accept(')')) return shape;
        while (true) {
            shape.push_back(integer());
            if (shape.size() > 64) fail("more than 64 dimensions");
            if (accept(')')) break;
            expect(',');
            if (accept(')')) break;  // (3,) and (2, 3,)
        }
        return shape;
    }

    std::string_view s_;
    const std::string& label_;
    std::size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text, const std::string& label) { return DictParser(text, label).parse(); }

}  // namespace roundscope::detail
