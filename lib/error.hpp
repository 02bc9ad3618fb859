#pragma once
// The one error type of roundscope. Its message names the file, tensor or option at fault;
// the CLI prints it as `roundscope: error: <message>` and exits with code 2.
#include <stdexcept>
#include <string>

namespace roundscope {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace roundscope
