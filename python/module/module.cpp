// roundscope._core: the C++ core for the Python package (python/roundscope). Errors arrive as
// the exceptions Python users expect: FileError as OSError, every other Error as ValueError,
// memory as MemoryError; each carries the command line's one-line message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "api/python_script.hpp"
#include "lib/error.hpp"
#include "lib/mapped_file.hpp"

namespace nb = nanobind;

namespace roundscope::python {
void bind_numbers(nb::module_& m);
void bind_numpy_cast(nb::module_& m);
void bind_files(nb::module_& m);
void bind_commands(nb::module_& m);
void bind_blocks(nb::module_& m);
void bind_analyses(nb::module_& m);
void bind_attention_calls(nb::module_& m);
void bind_report_calls(nb::module_& m);
}  // namespace roundscope::python

NB_MODULE(_core, m) {
    m.doc() = "roundscope's C++ core (use the roundscope package, not this module).";
    m.attr("__version__") = ROUNDSCOPE_VERSION;  // the build's, as `roundscope --version` says it
    // A page lost to a truncation would end the interpreter: files are read into memory instead,
    // where a truncation is an exception (roundscope.read(..., mmap=True) maps on request).
    roundscope::set_default_file_access(roundscope::FileAccess::copy);
    // Commands that draw (report's page, its TensorBoard export) run the package's modules with
    // the Python that imported this one, whose environment has the package.
    roundscope::api::use_python(nb::cast<std::string>(nb::module_::import_("sys").attr("executable")));
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const roundscope::FileError& e) {
            PyErr_SetString(PyExc_OSError, e.what());
        } catch (const roundscope::Error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        }
    });
    roundscope::python::bind_numbers(m);
    roundscope::python::bind_numpy_cast(m);
    roundscope::python::bind_files(m);
    roundscope::python::bind_commands(m);
    roundscope::python::bind_blocks(m);
    roundscope::python::bind_analyses(m);
    roundscope::python::bind_attention_calls(m);
    roundscope::python::bind_report_calls(m);
}
