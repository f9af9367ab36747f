// The timing and checking harness of cutlass_gemm8.cu (included by its part 0 only):
// random data, the CPU reference, the settled round-robin CUDA-event timing, main().
#pragma once

#include <array>
#include <chrono>

#include "cutlass/version.h"

namespace harness {

// SplitMix64: seeded, so every run times the same bytes.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / 16777216.0f; }  // [0, 1)
};

// Random operand bytes: every int8 value (-128..127) for INT8, and for e4m3 random bytes
// with bit 6 cleared (no NaN encodings, |x| < 2), the rule of `rcute bench gemm --dtype e4m3`.
std::vector<uint8_t> operand_bytes(Input in, size_t count, uint64_t seed) {
  Rng r{seed};
  std::vector<uint8_t> v(count);
  for (auto& x : v) x = static_cast<uint8_t>(r.next() >> 56) & (in == Input::Int8 ? 0xFF : 0xBF);
  return v;
}

// The value of an operand byte (e4m3 through a table: the reference reads it K times).
double operand_value(Input in, uint8_t byte) {
  if (in == Input::Int8) return static_cast<int8_t>(byte);
  static const std::vector<double> e4m3 = [] {
    std::vector<double> t(256);
    for (int b = 0; b < 256; ++b) {
      uint8_t u = static_cast<uint8_t>(b);
      cutlass::float_e4m3_t x;
      std::memcpy(&x, &u, 1);
      t[b] = static_cast<float>(x);
    }
    return t;
  }();
  return e4m3[byte];
}

double out_value(Out out, uint16_t bits) {
  if (out == Out::F16) return static_cast<float>(cutlass::half_t::bitcast(bits));
  return static_cast<float>(cutlass::bfloat16_t::bitcast(bits));
}

uint16_t out_bits(Out out, float x) {
  return out == Out::F16 ? cutlass::half_t(x).raw() : cutlass::bfloat16_t(x).raw();
}

// One problem's device memory: A and the B copies of both input types, D, scales, bias.
struct Problem {
  int m, n, k;
  std::vector<uint8_t> host_a[2], host_b[2];  // by Input
  std::vector<float> a_scale, b_scale, bias;   // bias before rounding to the output type
  void* a[2] = {};
  std::vector<void*> b[2];
  void* d = nullptr;
  float *dev_a_scale = nullptr, *dev_b_scale = nullptr;
  void* dev_bias[2] = {};  // by Out
  float alpha[2] = {};     // by Input: keeps the outputs O(1)

  static int index(Input in) { return in == Input::Int8 ? 0 : 1; }
  static int index(Out o) { return o == Out::F16 ? 0 : 1; }
};

// Copies of B so that the rotation covers >= `rotate_bytes` (at most 10, a divisor of the
// 10 launches of a sample, as in rcute's benches).
int rotation_copies(size_t bytes, size_t rotate_bytes) {
  for (int c : {1, 2, 5, 10})
    if (bytes * c >= rotate_bytes) return c;
  return 10;
}

void upload(Problem& p, size_t rotate_bytes) {
  const size_t mk = size_t(p.m) * p.k, nk = size_t(p.n) * p.k;
  const int copies = rotation_copies(nk, rotate_bytes);
  for (Input in : {Input::Int8, Input::E4m3}) {
    int i = Problem::index(in);
    p.host_a[i] = operand_bytes(in, mk, 0xA000 + i + p.m * 31ull + p.k);
    p.host_b[i] = operand_bytes(in, nk, 0xB000 + i + p.n * 37ull + p.k);
    CUDA_OK(cudaMalloc(&p.a[i], mk));
    CUDA_OK(cudaMemcpy(p.a[i], p.host_a[i].data(), mk, cudaMemcpyHostToDevice));
    for (int c = 0; c < copies; ++c) {
      void* ptr;
      CUDA_OK(cudaMalloc(&ptr, nk));
      CUDA_OK(cudaMemcpy(ptr, p.host_b[i].data(), nk, cudaMemcpyHostToDevice));
      p.b[i].push_back(ptr);
    }
  }
  // Scales that differ by row and by column; int8 sums of K products of full-range values
  // have a standard deviation of about 5500 sqrt(K).
  const float base = 1.0f / (128.0f * std::sqrt(float(p.k)));
  for (int r = 0; r < p.m; ++r) p.a_scale.push_back(base * (1.0f + (r % 7) / 8.0f));
  for (int c = 0; c < p.n; ++c) p.b_scale.push_back((1.0f + (c % 5) / 8.0f) / 128.0f);
  Rng r{0xC0FFEE + uint64_t(p.n)};
  for (int c = 0; c < p.n; ++c) p.bias.push_back(2.0f * r.uniform() - 1.0f);
  p.alpha[0] = base / 128.0f;
  p.alpha[1] = 1.0f / std::sqrt(float(p.k));
  CUDA_OK(cudaMalloc(&p.dev_a_scale, p.m * sizeof(float)));
  CUDA_OK(cudaMalloc(&p.dev_b_scale, p.n * sizeof(float)));
  CUDA_OK(cudaMemcpy(p.dev_a_scale, p.a_scale.data(), p.m * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(p.dev_b_scale, p.b_scale.data(), p.n * 4, cudaMemcpyHostToDevice));
  for (Out o : {Out::F16, Out::Bf16}) {
    std::vector<uint16_t> bits;
    for (float x : p.bias) bits.push_back(out_bits(o, x));
    void*& dst = p.dev_bias[Problem::index(o)];
    CUDA_OK(cudaMalloc(&dst, p.n * 2));
    CUDA_OK(cudaMemcpy(dst, bits.data(), p.n * 2, cudaMemcpyHostToDevice));
  }
  CUDA_OK(cudaMalloc(&p.d, size_t(p.m) * p.n * 2));
}

void release(Problem& p) {
  for (int i = 0; i < 2; ++i) {
    cudaFree(p.a[i]);
    for (void* ptr : p.b[i]) cudaFree(ptr);
    cudaFree(p.dev_bias[i]);
  }
  cudaFree(p.d);
  cudaFree(p.dev_a_scale);
  cudaFree(p.dev_b_scale);
}

Buffers buffers_for(const Problem& p, const Variant& v) {
  Buffers b;
  int i = Problem::index(v.input);
  b.a = p.a[i];
  for (void* ptr : p.b[i]) b.b.push_back(ptr);
  b.d = p.d;
  b.a_scale = p.dev_a_scale;
  b.b_scale = p.dev_b_scale;
  b.bias = p.dev_bias[Problem::index(v.out)];
  b.alpha = p.alpha[i];
  return b;
}

// The float64 reference of one output element (before rounding to the output type).
double reference(const Problem& p, const Variant& v, int r, int c) {
  int i = Problem::index(v.input);
  const uint8_t* a = p.host_a[i].data() + size_t(r) * p.k;
  const uint8_t* b = p.host_b[i].data() + size_t(c) * p.k;
  double acc = 0;
  if (v.input == Input::Int8) {
    int64_t s = 0;
    for (int kk = 0; kk < p.k; ++kk) s += int64_t(int8_t(a[kk])) * int8_t(b[kk]);
    acc = double(s);
  } else {
    for (int kk = 0; kk < p.k; ++kk) acc += operand_value(v.input, a[kk]) * operand_value(v.input, b[kk]);
  }
  if (v.epi == Epi::Alpha) return double(p.alpha[i]) * acc;
  double bias = out_value(v.out, out_bits(v.out, p.bias[c]));
  return double(p.a_scale[r]) * (double(p.b_scale[c]) * acc) + bias;
}

// The output's rounding step at |x| (f16: 10 fraction bits, bf16: 7).
double rounding_step(Out o, double x) {
  int frac = o == Out::F16 ? 10 : 7;
  // below the smallest normal value (2^-14 / 2^-126) the step stays that of the subnormals
  double ax = std::max(std::fabs(x), std::ldexp(1.0, o == Out::F16 ? -14 : -126));
  return std::ldexp(1.0, int(std::floor(std::log2(ax))) - frac);
}

struct Check {
  bool all_written = true;
  double max_steps = 0;  // largest |out - ref| in rounding steps of the output at ref
  double rel_l2 = 0;     // ||out - ref|| / ||ref|| over the checked elements
  int checked = 0;
};

// Poisons D (0xFF bytes: NaN in f16 and bf16), runs the variant once, then checks that every
// element was written and compares `samples` elements (all when the matrix is small) with
// the float64 reference.
Check check(const Problem& p, const Variant& v, Launcher& l, int samples) {
  const size_t mn = size_t(p.m) * p.n;
  CUDA_OK(cudaMemset(p.d, 0xFF, mn * 2));
  l.launch(0, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(mn);
  CUDA_OK(cudaMemcpy(out.data(), p.d, mn * 2, cudaMemcpyDeviceToHost));
  Check res;
  for (uint16_t bits : out)
    if (std::isnan(out_value(v.out, bits))) { res.all_written = false; break; }
  Rng r{0x5EED};
  bool all = mn <= size_t(samples);
  double num = 0, den = 0;
  for (size_t s = 0; s < (all ? mn : size_t(samples)); ++s) {
    size_t e = all ? s : r.next() % mn;
    int row = int(e / p.n), col = int(e % p.n);
    double ref = reference(p, v, row, col), got = out_value(v.out, out[e]);
    double diff = std::fabs(got - ref);
    if (std::isnan(got)) diff = INFINITY;
    res.max_steps = std::max(res.max_steps, diff / rounding_step(v.out, ref));
    num += diff * diff;
    den += ref * ref;
    ++res.checked;
  }
  res.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  return res;
}

// INT8 accumulates exactly and rounds once: within one rounding step. FP8's fast
// accumulation is looser: relative L2 error under 1e-2.
bool passes(const Variant& v, const Check& c) {
  if (!c.all_written || !(c.rel_l2 < 1e-2)) return false;
  return v.input != Input::Int8 || c.max_steps <= 1.0;
}

constexpr int kCallsPerSample = 10;

struct Timed {
  std::vector<double> us;  // per-call time of each sample
};

// Settles the clock by running every launcher in turns for `settle_ms`, then takes `iters`
// samples of each, round-robin: a sample is kCallsPerSample back-to-back launches between two
// CUDA events, the B copy advancing call by call.
std::vector<Timed> time_round_robin(std::vector<Launcher*>& ls, int copies, int iters,
                                    int settle_ms) {
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<int> cursor(ls.size(), 0);
  auto burst = [&](size_t v) {
    for (int c = 0; c < kCallsPerSample; ++c) {
      ls[v]->launch(cursor[v], st);
      cursor[v] = (cursor[v] + 1) % copies;
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(settle_ms)) {
    for (size_t v = 0; v < ls.size(); ++v) burst(v);
    CUDA_OK(cudaStreamSynchronize(st));
  }
  std::vector<cudaEvent_t> ev(2 * ls.size());
  for (auto& e : ev) CUDA_OK(cudaEventCreate(&e));
  std::vector<Timed> res(ls.size());
  for (int s = 0; s < iters; ++s) {
    for (size_t v = 0; v < ls.size(); ++v) {
      CUDA_OK(cudaEventRecord(ev[2 * v], st));
      burst(v);
      CUDA_OK(cudaEventRecord(ev[2 * v + 1], st));
    }
    CUDA_OK(cudaStreamSynchronize(st));
    for (size_t v = 0; v < ls.size(); ++v) {
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, ev[2 * v], ev[2 * v + 1]));
      res[v].us.push_back(1000.0 * ms / kCallsPerSample);
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(st);
  return res;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
  std::vector<std::array<int, 3>> shapes;
  int iters = 30;
  int settle_ms = 500;
  size_t rotate_bytes = 150000000;
  std::string only;          // comma-separated substrings of variant names
  bool small_check = true;   // the full check at an odd shape first
  bool print_samples = false;  // every sample's time, in the order taken
};

bool selected(const Options& o, const char* name) {
  if (o.only.empty()) return true;
  size_t start = 0;
  while (start <= o.only.size()) {
    size_t end = o.only.find(',', start);
    if (end == std::string::npos) end = o.only.size();
    if (std::strstr(name, o.only.substr(start, end - start).c_str())) return true;
    start = end + 1;
  }
  return false;
}

// Runs one shape: prepares every selected variant, checks it, then (when `timed`) times
// them in turns. Returns false when a check failed.
bool run_shape(const Options& o, std::array<int, 3> s, bool timed) {
  Problem p{s[0], s[1], s[2]};
  upload(p, timed ? o.rotate_bytes : 0);
  std::vector<Variant> vs;
  std::vector<std::unique_ptr<Launcher>> ls;
  bool ok = true;
  for (auto make : registry()) {
    Variant v = make();
    if (!selected(o, v.name)) continue;
    auto l = v.prepare(p.m, p.n, p.k, buffers_for(p, v));
    if (!l) { ok = false; continue; }
    Check c = check(p, v, *l, timed ? 4096 : 1 << 30);
    bool pass = passes(v, c);
    ok = ok && pass;
    std::printf("check %dx%dx%d %-32s %s written=%s checked=%d max_err=%.3f steps rel_l2=%.2e\n",
                p.m, p.n, p.k, v.name, pass ? "PASS" : "FAIL", c.all_written ? "all" : "NOT-ALL",
                c.checked, c.max_steps, c.rel_l2);
    vs.push_back(v);
    ls.push_back(std::move(l));
  }
  if (timed && !ls.empty()) {
    std::vector<Launcher*> raw;
    for (auto& l : ls) raw.push_back(l.get());
    auto t = time_round_robin(raw, int(p.b[0].size()), o.iters, o.settle_ms);
    double ops = 2.0 * p.m * p.n * double(p.k);
    for (size_t v = 0; v < vs.size(); ++v) {
      double med = median(t[v].us);
      auto mm = std::minmax_element(t[v].us.begin(), t[v].us.end());
      std::printf("time  %dx%dx%d %-32s median %9.1f us  %7.1f TOP/s  (samples %zu, min %.1f, max %.1f; B copies %zu)\n",
                  p.m, p.n, p.k, vs[v].name, med, ops / med * 1e-6, t[v].us.size(), *mm.first,
                  *mm.second, p.b[0].size());
      if (o.print_samples) {
        std::printf("      samples (us, in order):");
        for (double us : t[v].us) std::printf(" %.1f", us);
        std::printf("\n");
      }
    }
  }
  std::fflush(stdout);
  ls.clear();
  release(p);
  return ok;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(1); }
      return argv[++i];
    };
    if (a == "--shape") {
      std::array<int, 3> s{};
      if (std::sscanf(value().c_str(), "%dx%dx%d", &s[0], &s[1], &s[2]) != 3) {
        std::fprintf(stderr, "bad --shape (MxNxK)\n");
        std::exit(1);
      }
      o.shapes.push_back(s);
    } else if (a == "--iters") {
      o.iters = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--settle-ms") {
      o.settle_ms = std::atoi(value().c_str());
    } else if (a == "--only") {
      o.only = value();
    } else if (a == "--no-small-check") {
      o.small_check = false;
    } else if (a == "--print-samples") {
      o.print_samples = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--shape MxNxK]... [--iters N] [--settle-ms MS] [--only A,B] "
                   "[--no-small-check] [--print-samples]\n", argv[0]);
      std::exit(1);
    }
  }
  if (o.shapes.empty()) o.shapes = {{8192, 8192, 8192}, {4096, 14336, 4096}};
  return o;
}

}  // namespace harness

int main(int argc, char** argv) {
  harness::Options o = harness::parse(argc, argv);
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs); CUTLASS %d.%d.%d; TN, s8 x s8 -> s32 / e4m3 x e4m3 -> f32; "
              "%d samples of %d launches, median; settle %d ms; B rotated over >= %zu MB\n",
              prop.name, prop.multiProcessorCount, CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH,
              o.iters, harness::kCallsPerSample, o.settle_ms, o.rotate_bytes / 1000000);
  bool ok = true;
  // Not multiples of any tile: the residue paths, every element against float64.
  if (o.small_check) ok = harness::run_shape(o, {520, 392, 1040}, false) && ok;
  for (auto s : o.shapes) ok = harness::run_shape(o, s, true) && ok;
  std::printf("%s\n", ok ? "ALL CHECKS PASS" : "SOME CHECK FAILED");
  return ok ? 0 : 1;
}
