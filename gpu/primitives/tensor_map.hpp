#pragma once
// TMA maps made on the host, one spelling for both builds: under nvcc a CUtensorMap encoded by
// the driver's cuTensorMapEncodeTiled (found through the runtime, so that nothing links
// libcuda); on the simulated GPU the copy engine's map (gpu/host/simt_tma.hpp), checked as the
// driver checks it. A 3-D tensor of 8- or 16-bit elements (E4M3 bytes, BF16): dims[0]
// contiguous, dims[1] rows `row_bytes` apart, dims[2] planes `plane_bytes` apart.
#include <cstdint>

#include "gpu/primitives/tma.hpp"

#if !defined(ROUNDSCOPE_SIMT_HOST)
#include <cudaTypedefs.h>

#include "gpu/primitives/device_buffer.hpp"
#endif

namespace roundscope::gpu {

inline TmaMap tensor_map_3d(void* base, std::uint32_t element_bytes, const std::uint64_t (&dims)[3],
                            std::uint64_t row_bytes, std::uint64_t plane_bytes, const std::uint32_t (&box)[3],
                            Swizzle swizzle) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    return simt::make_tma_map_3d(static_cast<std::byte*>(base), element_bytes, dims, row_bytes, plane_bytes, box,
                                 swizzle);
#else
    static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found),
              "cuTensorMapEncodeTiled");
        if (found != cudaDriverEntryPointSuccess || fn == nullptr)
            throw Error("GPU: the driver has no cuTensorMapEncodeTiled (CUDA 12 or later is needed)");
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    const cuuint64_t size[3] = {dims[0], dims[1], dims[2]}, stride[2] = {row_bytes, plane_bytes};
    const cuuint32_t box_size[3] = {box[0], box[1], box[2]}, element_stride[3] = {1, 1, 1};
    const CUtensorMapSwizzle s = swizzle == Swizzle::b128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                 : swizzle == Swizzle::b64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : swizzle == Swizzle::b32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                           : CU_TENSOR_MAP_SWIZZLE_NONE;
    TmaMap map{};
    const CUresult r =
        encode(&map, element_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base,
               size, stride, box_size, element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE, s,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        throw Error("GPU: cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) + ")");
    return map;
#endif
}

inline TmaMap tensor_map_3d_bf16(void* base, const std::uint64_t (&dims)[3], std::uint64_t row_bytes,
                                 std::uint64_t plane_bytes, const std::uint32_t (&box)[3], Swizzle swizzle) {
    return tensor_map_3d(base, 2, dims, row_bytes, plane_bytes, box, swizzle);
}

}  // namespace roundscope::gpu
