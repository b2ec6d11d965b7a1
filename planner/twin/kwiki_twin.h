/* kwiki_twin.h: the CPU twins of kwiki's kernel families behind one C entry point.
 *
 * A twin computes what its family's V0 kernel computes (fp64 arithmetic, the kernel's roundings
 * at its stores) on host memory, with the tensors, dims and params of the family's launcher ABI
 * (baseline/kernels/ABI.md). kwiki plan proves a family against a reference with it; kwiki
 * baseline --device cpu runs it behind kernel.py. Plain C++ (no GPU, no torch). */
#ifndef KWIKI_TWIN_H
#define KWIKI_TWIN_H

#ifdef __cplusplus
extern "C" {
#endif

/** Element types of the tensors passed to kwiki_twin_launch. */
enum kwiki_twin_dtype {
  KWIKI_TWIN_F32 = 0,
  KWIKI_TWIN_BF16 = 1,
  KWIKI_TWIN_F16 = 2,
  KWIKI_TWIN_E4M3FN = 3,
  KWIKI_TWIN_E4M3FNUZ = 4,
  KWIKI_TWIN_I32 = 5,
  KWIKI_TWIN_I64 = 6,
  KWIKI_TWIN_U8 = 7
};

/** 1: this header's version. */
int kwiki_twin_abi_version(void);

/** Runs the twin of `family` (rms_norm, fused_add_rms_norm, layer_norm, softmax, row_reduce,
 *  gelu_and_mul, fp8_quant, moe_gating, gemm, paged_decode_attention, kv_cache_write (which
 *  writes its caches in place), topk_filter, paged_decode_attention_vllm, mla_decode, fused_moe,
 *  fp8_block_gemm, prefill_attention) on
 *  contiguous host tensors in the family's launcher order, each of element type dtypes[i]
 *  (a null tensor, such as gemm's absent bias, has any dtype). Returns 0, or -1 with a
 *  NUL-terminated reason in error[0..error_size) for arguments it cannot serve. */
int kwiki_twin_launch(const char* family, void* const* tensors, const int* dtypes, int num_tensors, const long long* dims,
                      int num_dims, const double* params, int num_params, char* error, int error_size);

#ifdef __cplusplus
}
#endif

#endif /* KWIKI_TWIN_H */
