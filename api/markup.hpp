#pragma once
// Text in XML and HTML (the JUnit file of `check`): the five special characters as entities,
// and the control characters XML 1.0 cannot hold at all (even as references) and bytes that are
// not UTF-8 (a file name can hold any) written out as \xNN, as every other one-line message
// writes them.
#include <string>
#include <string_view>

namespace roundscope::api {

std::string markup_escaped(std::string_view text);

}  // namespace roundscope::api
