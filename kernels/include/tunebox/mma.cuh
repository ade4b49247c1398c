// Tensor-core wrappers of the tile library (bfloat16 in, float32 accumulators): mma.sync m16n8k16,
// ldmatrix, and Hopper's wgmma (sm_90a) with its shared-memory descriptors, fences and waits.
// Register layouts are the PTX ISA's (``Matrix Fragments for mma.m16n8k16``, ``wgmma``); callers own
// the tiles' shared-memory layout.
#pragma once

#include "tunebox/tma.cuh"

namespace tb {

// D (16 x 8, float32 fragment) += A (16 x 16, row) * B (16 x 8, col), bfloat16 operands.
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, const u32* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Zeroes MT x NT m16n8 accumulator fragments (four float32 a thread each).
template <int MT, int NT>
__device__ __forceinline__ void zero_fragments(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
}

// B fragment of an mma from shared memory: ldmatrix.x2.trans at `row` (each lane passes the address of
// its row: lanes 0-15 rows k0 .. k0 + 15 of the 16 x 8 block), two 32-bit registers per lane.
__device__ __forceinline__ void ldmatrix_x2_trans(const void* row, u32* b) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(shared_address(row)));
}

// A fragment of an mma from a shared tile stored K-major (element (k, m) at row k): ldmatrix.x4.trans,
// lane l passing the address of row k0 + l % 8 + 8 * (l / 16), columns m0 + 8 * (l / 8 % 2) .. + 7;
// four registers per lane, the m16n8k16 A fragment of the 16 x 16 block (rows m0 .., columns k0 ..).
__device__ __forceinline__ void ldmatrix_x4_trans(const void* row, u32* a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(shared_address(row)));
}

// B fragments of two mmas from a shared tile stored N-major (element (n, k) at row n): ldmatrix.x4,
// lane l passing the address of row n0 + l % 8 + 8 * (l / 16), columns k0 + 8 * (l / 8 % 2) .. + 7;
// b[0], b[1] the m16n8k16 B fragment of the 16 x 8 block (k0 .., n0 ..), b[2], b[3] that of (k0 .., n0 + 8 ..).
__device__ __forceinline__ void ldmatrix_x4(const void* row, u32* b) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(shared_address(row)));
}

// The first half of ldmatrix_x4: one B fragment (lanes 0-15 pass their rows' addresses).
__device__ __forceinline__ void ldmatrix_x2(const void* row, u32* b) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(shared_address(row)));
}

// -- wgmma (sm_90a) -------------------------------------------------------------------------------

// Shared-memory matrix descriptor with the 128-byte swizzle (PTX ISA, "Matrix Descriptor Format"):
// start address, leading and stride byte offsets (16-byte units), swizzle mode 1 in bits 62-63.
// Buffers start 1024-byte aligned, so the base offset field stays 0.
__device__ __forceinline__ u64 wgmma_descriptor(const void* p, u32 leading_bytes, u32 stride_bytes) {
  return (u64)((shared_address(p) & 0x3FFFF) >> 4) | ((u64)(leading_bytes >> 4) << 16) |
         ((u64)(stride_bytes >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most PENDING committed wgmma groups of this warpgroup are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Keeps the compiler from moving accesses of the accumulators across wgmma fences and waits.
template <int COUNT>
__device__ __forceinline__ void pin_registers(float* d) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x N, float32, the wgmma accumulator fragment) += A (64 x 16, K-major) * B (16 x N), B N-major
// (TRANS_B = 1: element (k, n) at row k) or K-major (TRANS_B = 0: at row n).
// The instruction names each of a thread's N / 2 accumulators: TB_WGMMA_REGS_q are the placeholders of
// accumulators 32 q .. 32 q + 31 (asm operands of the same numbers), TB_WGMMA_D(q) those operands.
#define TB_WGMMA_REGS_0  \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TB_WGMMA_REGS_1  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TB_WGMMA_REGS_2  \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "  \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define TB_WGMMA_REGS_3  \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "  \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TB_WGMMA_D(q)  \
      "+f"(d[32 * (q) + 0]), "+f"(d[32 * (q) + 1]), "+f"(d[32 * (q) + 2]), "+f"(d[32 * (q) + 3]),  \
      "+f"(d[32 * (q) + 4]), "+f"(d[32 * (q) + 5]), "+f"(d[32 * (q) + 6]), "+f"(d[32 * (q) + 7]),  \
      "+f"(d[32 * (q) + 8]), "+f"(d[32 * (q) + 9]), "+f"(d[32 * (q) + 10]), "+f"(d[32 * (q) + 11]),  \
      "+f"(d[32 * (q) + 12]), "+f"(d[32 * (q) + 13]), "+f"(d[32 * (q) + 14]), "+f"(d[32 * (q) + 15]),  \
      "+f"(d[32 * (q) + 16]), "+f"(d[32 * (q) + 17]), "+f"(d[32 * (q) + 18]), "+f"(d[32 * (q) + 19]),  \
      "+f"(d[32 * (q) + 20]), "+f"(d[32 * (q) + 21]), "+f"(d[32 * (q) + 22]), "+f"(d[32 * (q) + 23]),  \
      "+f"(d[32 * (q) + 24]), "+f"(d[32 * (q) + 25]), "+f"(d[32 * (q) + 26]), "+f"(d[32 * (q) + 27]),  \
      "+f"(d[32 * (q) + 28]), "+f"(d[32 * (q) + 29]), "+f"(d[32 * (q) + 30]), "+f"(d[32 * (q) + 31])

// Wgmma<N, TRANS_B> for one N: the placeholders REGS of its accumulators, then operands A and B
// (descriptors), P (scale-d, always 1: D accumulates) and T (B's transpose flag), the accumulator
// operands last.
#define TB_WGMMA(N, A, B, P, T, REGS, ...)                                                                  \
  template <int TRANS_B>                                                                                  \
  struct Wgmma<N, TRANS_B> {                                                                              \
    __device__ __forceinline__ static void run(float* d, u64 a, u64 b) {                                  \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                                       \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" REGS "}, %" #A ", %" #B        \
                   ", p, 1, 1, 0, %" #T ";\n}\n"                                                            \
                   : __VA_ARGS__                                                                          \
                   : "l"(a), "l"(b), "r"(1), "n"(TRANS_B));                                               \
    }                                                                                                     \
  };

template <int N, int TRANS_B = 1>
struct Wgmma;

TB_WGMMA(64, 32, 33, 34, 35, TB_WGMMA_REGS_0, TB_WGMMA_D(0))
TB_WGMMA(128, 64, 65, 66, 67, TB_WGMMA_REGS_0 ", " TB_WGMMA_REGS_1, TB_WGMMA_D(0), TB_WGMMA_D(1))
TB_WGMMA(192, 96, 97, 98, 99, TB_WGMMA_REGS_0 ", " TB_WGMMA_REGS_1 ", " TB_WGMMA_REGS_2, TB_WGMMA_D(0), TB_WGMMA_D(1),
         TB_WGMMA_D(2))
TB_WGMMA(256, 128, 129, 130, 131, TB_WGMMA_REGS_0 ", " TB_WGMMA_REGS_1 ", " TB_WGMMA_REGS_2 ", " TB_WGMMA_REGS_3,
         TB_WGMMA_D(0), TB_WGMMA_D(1), TB_WGMMA_D(2), TB_WGMMA_D(3))

// D (64 x N, float32) += A (64 x 16 in registers) * B (16 x N, K-major: element (k, n) at row n), for
// operands decoded in registers (quant_gemm's template registers). Warp w of the warpgroup holds rows
// 16 w .. 16 w + 15 of A as mma.m16n8k16's A fragment: lane 4 g + t holds a[0] = (g, 2t .. 2t + 1),
// a[1] = (g + 8, 2t ..), a[2] = (g, 2t + 8 ..), a[3] = (g + 8, 2t + 8 ..), each a bfloat16x2 (low half the
// first). D is overwritten where `accumulate` is 0 (scale-d), so that no other instruction writes the
// accumulators while wgmmas run. The placeholders: REGS of the N / 2 accumulators, A0-A3 the fragment, B
// the descriptor, P scale-d.
#define TB_WGMMA_REGS_4 "%0, %1, %2, %3"
#define TB_WGMMA_REGS_8 TB_WGMMA_REGS_4 ", %4, %5, %6, %7"
#define TB_WGMMA_REGS_16 TB_WGMMA_REGS_8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define TB_WGMMA_D4 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define TB_WGMMA_D8 TB_WGMMA_D4, "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define TB_WGMMA_D16 \
  TB_WGMMA_D8, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define TB_WGMMA_RS(N, A0, A1, A2, A3, B, P, REGS, ...)                                                    \
  template <>                                                                                           \
  struct WgmmaRs<N> {                                                                                   \
    __device__ __forceinline__ static void run(float* d, const u32 (&a)[4], u64 b, u32 accumulate) {     \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                                      \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" REGS "}, {%" #A0 ", %" #A1  \
                   ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1, 0;\n}\n"                                       \
                   : __VA_ARGS__                                                                        \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));              \
    }                                                                                                   \
  };

template <int N>
struct WgmmaRs;

TB_WGMMA_RS(8, 4, 5, 6, 7, 8, 9, TB_WGMMA_REGS_4, TB_WGMMA_D4)
TB_WGMMA_RS(16, 8, 9, 10, 11, 12, 13, TB_WGMMA_REGS_8, TB_WGMMA_D8)
TB_WGMMA_RS(32, 16, 17, 18, 19, 20, 21, TB_WGMMA_REGS_16, TB_WGMMA_D16)
TB_WGMMA_RS(64, 32, 33, 34, 35, 36, 37, TB_WGMMA_REGS_0, TB_WGMMA_D(0))
TB_WGMMA_RS(128, 64, 65, 66, 67, 68, 69, TB_WGMMA_REGS_0 ", " TB_WGMMA_REGS_1, TB_WGMMA_D(0), TB_WGMMA_D(1))
TB_WGMMA_RS(256, 128, 129, 130, 131, 132, 133,
            TB_WGMMA_REGS_0 ", " TB_WGMMA_REGS_1 ", " TB_WGMMA_REGS_2 ", " TB_WGMMA_REGS_3, TB_WGMMA_D(0),
            TB_WGMMA_D(1), TB_WGMMA_D(2), TB_WGMMA_D(3))

#undef TB_WGMMA_REGS_0
#undef TB_WGMMA_REGS_1
#undef TB_WGMMA_REGS_2
#undef TB_WGMMA_REGS_3
#undef TB_WGMMA_REGS_4
#undef TB_WGMMA_REGS_8
#undef TB_WGMMA_REGS_16
#undef TB_WGMMA_D
#undef TB_WGMMA_D4
#undef TB_WGMMA_D8
#undef TB_WGMMA_D16
#undef TB_WGMMA
#undef TB_WGMMA_RS

}  // namespace tb
