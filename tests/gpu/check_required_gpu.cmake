# With ROUNDSCOPE_REQUIRE_GPU=1 a GPU test never skips: without a usable GPU it fails (exit 1,
# saying why), with one it runs. Usage: cmake -DPROGRAM=<gpu test> -P check_required_gpu.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -E env ROUNDSCOPE_REQUIRE_GPU=1 ${PROGRAM}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(out MATCHES "no usable GPU")
  if(NOT rc EQUAL 1 OR NOT out MATCHES "ROUNDSCOPE_REQUIRE_GPU=1: failed")
    message(FATAL_ERROR "no GPU under ROUNDSCOPE_REQUIRE_GPU=1 gave exit ${rc}, not a failure:\n${out}")
  endif()
  message(STATUS "no GPU here: the test failed as required (exit 1)")
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "the GPU test failed on this GPU (exit ${rc}):\n${out}${err}")
endif()
