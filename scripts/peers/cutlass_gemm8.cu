// CUTLASS's own SM90 8-bit GEMMs (INT8 and FP8 e4m3, "TN": A row-major M x K, B stored
// N x K), built with CUTLASS's public CollectiveBuilder API, timed the way rcute's benches
// time theirs: random full-range data, B rotated over copies of >= 150 MB, a settling run,
// then medians of CUDA-event samples of 10 launches, the variants of a shape taken in turns.
// A peer for `rcute bench scaled-mm` / `rcute bench gemm --dtype e4m3`, run in the same call.
//
// Build: scripts/peers/cutlass_gemm8.sh (one object per kernel, GEMM8_PART=0 is the harness).
// Run:   cutlass_gemm8 [--shape MxNxK]... [--iters N] [--settle-ms MS] [--only A,B]
//        [--no-small-check] [--print-samples]
//
// Epilogues:
//   alpha      D = alpha * acc (no C read), the form of ../shared/GPU.md's 1595 TOP/s anchor;
//   scaled_mm  D = a_scale[m] * (b_scale[n] * acc) + bias[n]: rcute's `scaled_mm` epilogue
//              as a CUTLASS epilogue visitor tree (per-token, per-channel scales, bias).

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#ifndef GEMM8_PART
#define GEMM8_PART 0  // the harness; the build script compiles parts 0..7
#endif

#include "cutlass/bfloat16.h"
#include "cutlass/float8.h"
#include "cutlass/half.h"

#define CUDA_OK(x)                                                                 \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,               \
                   cudaGetErrorString(e_));                                        \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

// What a variant's launcher reads and writes; the harness owns the memory.
struct Buffers {
  const void* a = nullptr;           // M x K, row-major
  std::vector<const void*> b;        // copies of the N x K operand, rotated call by call
  void* d = nullptr;                 // M x N, row-major, f16 or bf16
  const float* a_scale = nullptr;    // M (scaled_mm epilogue)
  const float* b_scale = nullptr;    // N (scaled_mm epilogue)
  const void* bias = nullptr;        // N, the output type (scaled_mm epilogue)
  float alpha = 1.0f;                // alpha epilogue
};

// One prepared kernel: `launch(copy)` enqueues one GEMM reading B copy `copy`.
struct Launcher {
  virtual ~Launcher() = default;
  virtual void launch(int copy, cudaStream_t stream) = 0;
};

enum class Input { Int8, E4m3 };
enum class Out { F16, Bf16 };
enum class Epi { Alpha, ScaledMm };

struct Variant {
  const char* name;
  Input input;
  Out out;
  Epi epi;
  // nullptr (with a message on stderr) when CUTLASS cannot run the shape.
  std::unique_ptr<Launcher> (*prepare)(int m, int n, int k, const Buffers&);
};

#if GEMM8_PART > 0
// ---------------------------------------------------------------- one kernel per part
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace gemm8 {
using namespace cute;
namespace fusion = cutlass::epilogue::fusion;

template <Input I> struct InputOf;
template <> struct InputOf<Input::Int8> { using T = int8_t; using Acc = int32_t; };
template <> struct InputOf<Input::E4m3> { using T = cutlass::float_e4m3_t; using Acc = float; };
template <Out O> struct OutOf;
template <> struct OutOf<Out::F16> { using T = cutlass::half_t; };
template <> struct OutOf<Out::Bf16> { using T = cutlass::bfloat16_t; };

// Kernel and epilogue schedules: the cooperative kernel (two consumer warpgroups on one
// tile) or the ping-pong one (each consumer warpgroup on its own tile); FP8 takes the
// "fast accumulation" forms (the wgmma accumulator only, no periodic promotion), as rcute's
// FP8 kernel and cuBLASLt's default do.
struct Coop {
  template <Input I>
  using Kernel = std::conditional_t<I == Input::Int8,
                                    cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                    cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum>;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
  template <Input I>
  using Kernel = std::conditional_t<I == Input::Int8,
                                    cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                    cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum>;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

// D = a_scale[m] * (b_scale[n] * acc) + bias[n], in f32, rounded once to the output type.
template <class Tile, class D>
using ScaledMmTree = fusion::Sm90EVT<
    fusion::Sm90Compute<cutlass::homogeneous_multiply_add, D, float,
                        cutlass::FloatRoundStyle::round_to_nearest>,
    // a_scale: one value per row m, broadcast along n (stride 1 in m, 0 in n)
    fusion::Sm90ColBroadcast<0, Tile, float, float, Stride<_1, _0, int64_t>>,
    fusion::Sm90EVT<
        fusion::Sm90Compute<cutlass::multiplies, float, float,
                            cutlass::FloatRoundStyle::round_to_nearest>,
        // b_scale: one value per column n, broadcast along m
        fusion::Sm90RowBroadcast<0, Tile, float, float, Stride<_0, _1, int64_t>>,
        fusion::Sm90AccFetch>,
    // bias: one value per column n, in the output type
    fusion::Sm90RowBroadcast<0, Tile, D, float, Stride<_0, _1, int64_t>>>;

template <Input I, Out O, class Schedule, int TM, int TN, int TK, int CM, Epi E>
struct Gemm {
  using A = typename InputOf<I>::T;
  using Acc = typename InputOf<I>::Acc;
  using D = typename OutOf<O>::T;
  using Tile = Shape<Int<TM>, Int<TN>, Int<TK>>;
  using Cluster = Shape<Int<CM>, _1, _1>;
  static constexpr int kAlignAB = 16 / sizeof(A);  // 16-byte TMA rows
  static constexpr int kAlignD = 16 / sizeof(D);
  using Fusion = std::conditional_t<E == Epi::Alpha,
                                    fusion::LinearCombination<D, float, void, float>,
                                    ScaledMmTree<Tile, D>>;
  // No C operand (void): the epilogue reads no source tensor.
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, Acc, float, void,
      cutlass::layout::RowMajor, kAlignD, D, cutlass::layout::RowMajor, kAlignD,
      typename Schedule::Epilogue, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, A, cutlass::layout::RowMajor,
      kAlignAB, A, cutlass::layout::ColumnMajor, kAlignAB, Acc, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Schedule::template Kernel<I>>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Op = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Op::Arguments arguments(int m, int n, int k, const Buffers& buf, int copy) {
    using K = typename Op::GemmKernel;
    auto sa = cutlass::make_cute_packed_stride(typename K::StrideA{}, make_shape(m, k, 1));
    auto sb = cutlass::make_cute_packed_stride(typename K::StrideB{}, make_shape(n, k, 1));
    auto sc = cutlass::make_cute_packed_stride(typename K::StrideC{}, make_shape(m, n, 1));
    auto sd = cutlass::make_cute_packed_stride(typename K::StrideD{}, make_shape(m, n, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    typename Op::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const A*>(buf.a), sa, static_cast<const A*>(buf.b[copy]), sb},
        {{}, nullptr, sc, static_cast<D*>(buf.d), sd},
        hw};
    if constexpr (E == Epi::Alpha) {
      args.epilogue.thread.alpha = buf.alpha;
      args.epilogue.thread.beta = 0.0f;
    } else {
      // Tree arguments: children first, then the node's own (empty for the computes).
      args.epilogue.thread = {
          {buf.a_scale, 0.0f, {}},
          {{buf.b_scale, 0.0f, {}}, {}, {}},
          {static_cast<const D*>(buf.bias), D(0), {}},
          {}};
    }
    return args;
  }
};

// One initialized CUTLASS operator per B copy (the operator keeps its TMA descriptors).
template <class G>
struct CutlassLauncher : Launcher {
  std::vector<typename G::Op> ops;
  void* workspace = nullptr;
  ~CutlassLauncher() override { cudaFree(workspace); }
  void launch(int copy, cudaStream_t stream) override {
    cutlass::Status s = ops[copy].run(stream);
    if (s != cutlass::Status::kSuccess) {
      std::fprintf(stderr, "cutlass run: %s\n", cutlassGetStatusString(s));
      std::exit(2);
    }
  }
};

template <class G>
std::unique_ptr<Launcher> prepare(int m, int n, int k, const Buffers& buf) {
  auto l = std::make_unique<CutlassLauncher<G>>();
  l->ops.resize(buf.b.size());
  size_t ws = 0;
  for (size_t c = 0; c < buf.b.size(); ++c) {
    auto args = G::arguments(m, n, k, buf, static_cast<int>(c));
    cutlass::Status s = G::Op::can_implement(args);
    if (s != cutlass::Status::kSuccess) {
      std::fprintf(stderr, "can_implement %dx%dx%d: %s\n", m, n, k, cutlassGetStatusString(s));
      return nullptr;
    }
    ws = std::max(ws, G::Op::get_workspace_size(args));
  }
  if (ws > 0) CUDA_OK(cudaMalloc(&l->workspace, ws));
  for (size_t c = 0; c < buf.b.size(); ++c) {
    auto args = G::arguments(m, n, k, buf, static_cast<int>(c));
    cutlass::Status s = l->ops[c].initialize(args, l->workspace);
    if (s != cutlass::Status::kSuccess) {
      std::fprintf(stderr, "initialize: %s\n", cutlassGetStatusString(s));
      return nullptr;
    }
  }
  return l;
}
}  // namespace gemm8

// In a kernel object, a variant line defines its `make_` function.
#define GEMM8_VARIANT(name, in, out, sched, tm, tn, tk, cm, epi)                          \
  Variant make_##name() {                                                                 \
    using G = gemm8::Gemm<Input::in, Out::out, gemm8::sched, tm, tn, tk, cm, Epi::epi>; \
    return {#name, Input::in, Out::out, Epi::epi, &gemm8::prepare<G>};                   \
  }

#else
// ---------------------------------------------------------------- the harness (part 0)

static std::vector<Variant (*)()>& registry() {
  static std::vector<Variant (*)()> r;
  return r;
}
static bool register_variant(Variant (*make)()) {
  registry().push_back(make);
  return true;
}
// In the harness object, a variant line declares its `make_` function and registers it
// (static initialization runs in the order of the lines below).
#define GEMM8_VARIANT(name, ...) \
  Variant make_##name();         \
  static const bool registered_##name = register_variant(&make_##name);

#include "cutlass_gemm8_harness.h"
#endif

// The variants: name, input, output, schedule, tile M x N x K, cluster M (x 1), epilogue.
// Each is compiled in its own object (GEMM8_PART = its line's number), side by side.
#if GEMM8_PART == 0 || GEMM8_PART == 1  // the anchor's form: cooperative 128x256x128, 2x1, f16, alpha
GEMM8_VARIANT(int8_coop_256_c2_f16_alpha, Int8, F16, Coop, 128, 256, 128, 2, Alpha)
#endif
#if GEMM8_PART == 0 || GEMM8_PART == 2
GEMM8_VARIANT(int8_coop_256_c2_bf16_alpha, Int8, Bf16, Coop, 128, 256, 128, 2, Alpha)
#endif
#if GEMM8_PART == 0 || GEMM8_PART == 3
GEMM8_VARIANT(int8_pp_128_c2_bf16_alpha, Int8, Bf16, Pingpong, 128, 128, 128, 2, Alpha)
#endif
#if GEMM8_PART == 0 || GEMM8_PART == 4  // rcute's scaled_mm epilogue
GEMM8_VARIANT(int8_coop_256_c2_bf16_scaled, Int8, Bf16, Coop, 128, 256, 128, 2, ScaledMm)
#endif
#if GEMM8_PART == 0 || GEMM8_PART == 5
GEMM8_VARIANT(int8_pp_128_c2_bf16_scaled, Int8, Bf16, Pingpong, 128, 128, 128, 2, ScaledMm)
#endif
#if GEMM8_PART == 0 || GEMM8_PART == 6
GEMM8_VARIANT(e4m3_coop_256_c2_bf16_alpha, E4m3, Bf16, Coop, 128, 256, 128, 2, Alpha)
#endif
#if GEMM8_PART == 0 || GEMM8_PART == 7
GEMM8_VARIANT(e4m3_pp_128_c2_bf16_alpha, E4m3, Bf16, Pingpong, 128, 128, 128, 2, Alpha)
#endif
