#include "api/file_source.hpp"

#include <string_view>

#include "api/argument_error.hpp"

namespace roundscope::api {

void rethrow_naming(const FileSource& source, std::exception_ptr error) {
    try {
        std::rethrow_exception(error);
    } catch (const FileError&) {
        throw;
    } catch (const ArgumentError&) {
        throw;
    } catch (const TensorError& e) {
        if (source.tensors_are_arguments && (e.file().empty() || e.file() == source.name))
            throw ArgumentError(e.tensor(), e.detail());
        if (source.name.empty() || !e.file().empty()) throw;
        throw TensorError(source.name, e.tensor(), e.detail());
    } catch (const Error& e) {
        if (source.name.empty() || std::string_view(e.what()).find(source.name) != std::string_view::npos) throw;
        throw Error(source.name + ": " + e.what());
    }
}

}  // namespace roundscope::api
