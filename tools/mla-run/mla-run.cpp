//===- mla-run.cpp - generate or read inputs, run, check, time ------------===//
//
// The tool users reach for first: it builds a decode problem (generated like
// the public benchmark, or read from .npy files), runs it on a backend through
// the runtime's C API (an artifact compiled in memory, or --artifact FILE),
// compares the output with the independent float64 reference and reports
// rel_err / max_abs_err; it exits non-zero when the output is out of
// tolerance and on any bad input.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime.h"

#include "mla/Compiler/ArtifactCompiler.h"
#include "mla/Compiler/ConfigFlags.h"
#include "mla/Runtime/Artifact.h"
#include "mla/Runtime/Numerics.h"
#include "mla/Support/PhaseLog.h"
#include "mla/Support/Version.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Tools/Npy.h"
#include "mla/Tools/Problem.h"
#include "mla/Tools/Reference.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>

using namespace mla;
namespace cl = llvm::cl;

static cl::OptionCategory category("mla-run options");
static cl::opt<bool> generate("generate", cl::desc("Generate inputs (q, kv ~ 0.02 N(0,1))"),
                              cl::cat(category));
static cl::opt<std::string> inputsDir("inputs", cl::desc("Read inputs from the .npy files in DIR"),
                                      cl::value_desc("DIR"), cl::cat(category));
static cl::opt<int64_t> batch("batch", cl::desc("Sequences (default: one per --kv-len entry)"),
                              cl::init(0), cl::cat(category));
static cl::list<int64_t> kvLens("kv-len", cl::desc("KV length, or one per sequence"),
                                cl::CommaSeparated, cl::cat(category));
static cl::list<int64_t> qLens("q-len",
                              cl::desc("Query tokens per sequence (1..4), or one count per sequence (default 1)"),
                              cl::CommaSeparated, cl::cat(category));
static cl::opt<int64_t> heads("heads", cl::desc("Query heads H (multiple of 16, <= 128)"),
                              cl::init(16), cl::cat(category));
static cl::opt<int64_t> qkDim("qk-dim", cl::desc("q/k head dim Dqk (generated inputs)"),
                              cl::init(576), cl::cat(category));
static cl::opt<int64_t> vDim("v-dim", cl::desc("v head dim Dv"), cl::init(512),
                             cl::cat(category));
static cl::opt<std::string> formatOpt("format", cl::desc("KV cache format: bf16, fp8 or mxfp4"),
                                      cl::cat(category));
static cl::opt<uint64_t> seed("seed", cl::desc("Random seed"), cl::init(0), cl::cat(category));
static cl::opt<double> qScale("q-scale",
                              cl::desc("Multiply generated q; large values give sharp "
                                       "attention (score std ~ 4e-4 * q-scale)"),
                              cl::init(1.0), cl::cat(category));
static cl::opt<int64_t> spareRows(
    "spare-rows",
    cl::desc("Generated inputs: a cache pool with N rows after the batch's, "
             "filled with NaN codes (never read)"),
    cl::init(0), cl::cat(category));
static cl::opt<int64_t> outliers(
    "outliers",
    cl::desc("Generated inputs: N random cache rows and N random columns 30 "
             "times larger (large activations)"),
    cl::init(0), cl::cat(category));
static cl::opt<int64_t> pageSize(
    "page-size",
    cl::desc("Generated inputs: a paged cache of P rows per page (a power of "
             "two, 1..256), the batch's pages shuffled among spare pages of "
             "NaN codes; 0: contiguous"),
    cl::value_desc("P"), cl::init(0), cl::cat(category));
static cl::opt<double> smScale("sm-scale", cl::desc("Softmax scale (default 1/sqrt(Dqk))"),
                               cl::init(0.0), cl::cat(category));
static cl::opt<std::string> saveInputs("save-inputs", cl::desc("Write the inputs as .npy to DIR"),
                                       cl::value_desc("DIR"), cl::cat(category));
static cl::opt<std::string> backend("backend",
                                    cl::desc("Backend: cpu (reference lowering), emu "
                                             "(the gfx950 kernels on the CPU), hip "
                                             "(an AMD GPU) or cuda (the sm_90a "
                                             "kernels on an NVIDIA Hopper GPU)"),
                                    cl::init("cpu"),
                                    cl::cat(category));
static cl::opt<std::string> pipeline(
    "pipeline",
    cl::desc("cpu pipeline: decompose (whole-sequence softmax) or split "
             "(planned split-KV, KV tiles with online softmax, combine)"),
    cl::init("decompose"), cl::cat(category));
// The decode's configuration: the split pipeline, emu and hip compile with
// it (the flags of mla-compile and mla-opt's pipeline options).
static ConfigFlags config(category);
static cl::opt<std::string> outPath("out", cl::desc("Write the output (float32 [T, H, Dv])"),
                                    cl::value_desc("OUT.npy"), cl::cat(category));
static cl::opt<std::string> lsePath("lse", cl::desc("Write the lse (float32 [T, H])"),
                                    cl::value_desc("LSE.npy"), cl::cat(category));
static cl::opt<int> repeat("repeat", cl::desc("Run N times and print the median time"),
                           cl::init(1), cl::cat(category));
static cl::opt<bool> noCheck("no-check", cl::desc("Skip the float64 reference check"),
                             cl::cat(category));
static cl::opt<bool> testCorruptLayout(
    "test-corrupt-mfma-layout",
    cl::desc("Testing only (emu): build the kernels with a wrong MFMA operand "
             "layout, to show that the numerics check catches it"),
    cl::Hidden, cl::cat(category));
static cl::opt<std::string> artifactPath(
    "artifact",
    cl::desc("Run this artifact (from mla-compile) instead of compiling one"),
    cl::value_desc("FILE"), cl::cat(category));
static cl::opt<int> deviceOpt("device", cl::desc("hip, cuda: the GPU to run on"),
                              cl::init(0), cl::cat(category));
static cl::opt<bool> dumpIR("dump-ir",
                            cl::desc("Print the IR after every pass that builds "
                                     "the backend's form of the decode"),
                            cl::cat(category));

static cl::opt<bool> noHazardCheck(
    "no-hazard-check",
    cl::desc("emu: skip the LDS hazard checks (races between waves, reads of "
             "DMAs no wait retired); faster"),
    cl::cat(category));
static cl::opt<uint64_t> emuScheduleSeed(
    "emu-schedule-seed",
    cl::desc("emu: run each workgroup's lanes in a random order drawn from "
             "this seed (0: in id order)"),
    cl::init(0), cl::cat(category));
static cl::opt<std::string> testEmuHazard(
    "test-emu-hazard",
    cl::desc("Testing only (emu): build the partial kernel with one "
             "synchronization or bounds bug (drop-tile-barrier, short-wait, "
             "drop-max-barrier, drop-loop-barrier; sm_90a: "
             "unguarded-scale-load), to show that the emu reports it"),
    cl::Hidden, cl::cat(category));

static cl::opt<int> replay(
    "replay",
    cl::desc("Run N random batches through one device plan and one set of "
             "buffers sized from the maxima (--batch sequences, the largest "
             "--kv-len, 4 query tokens each, --page-size), launching with "
             "identical arguments, as a captured graph replays; each step is "
             "checked (hip, emu)"),
    cl::value_desc("N"), cl::init(0), cl::cat(category));

static cl::opt<bool> kvTraffic(
    "kv-traffic",
    cl::desc("emu: print the modelled cache traffic of the partial kernel "
             "(distinct bytes, DMA bytes, reads from other XCDs, HBM reads "
             "per byte)"),
    cl::cat(category));

static cl::opt<bool> verbose(
    "verbose",
    cl::desc("Print each phase (compile, JIT, launches, reference) with its "
             "time on stderr; on by default when stderr is a terminal"),
    cl::cat(category));

static PhaseLog phases("mla-run");

static int fail(const llvm::Twine &msg) {
  phases.interrupt();
  llvm::WithColor::error(llvm::errs(), "mla-run") << msg << "\n";
  return 1;
}

static int fail(llvm::Error err) { return fail(llvm::toString(std::move(err))); }

namespace {
struct RunOutput {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

llvm::Error runtimeError(mla_status status, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 what + ": " + mla_status_name(status) + ": " +
                                     mla_last_error());
}

#define CHECK_MLA(call, what)                                                  \
  if (mla_status status_ = (call))                                             \
    return runtimeError(status_, what);

/// Device buffers of one run, freed on every path.
struct DeviceBuffers {
  mla_context context = nullptr;
  std::vector<void *> pointers;
  ~DeviceBuffers() {
    for (void *p : pointers)
      mla_free(context, p);
  }
  llvm::Expected<void *> allocate(size_t bytes, const void *init,
                                  bool poison) {
    void *ptr = nullptr;
    CHECK_MLA(mla_malloc(context, bytes, &ptr), "allocating device memory");
    pointers.push_back(ptr);
    if (init) {
      CHECK_MLA(mla_copy_to_device(context, ptr, init, bytes), "copying in");
    } else if (poison) {
      // NaN everywhere: a kernel that leaves an output unwritten fails the
      // check instead of passing on zeroed memory.
      std::vector<uint8_t> nan(bytes, 0xFF);
      CHECK_MLA(mla_copy_to_device(context, ptr, nan.data(), bytes),
                "copying in");
    }
    return ptr;
  }
};

struct Handles {
  mla_context context = nullptr;
  mla_kernel kernel = nullptr;
  mla_plan plan = nullptr;
  ~Handles() {
    if (plan)
      mla_plan_destroy(plan);
    if (kernel)
      mla_kernel_destroy(kernel);
    if (context)
      mla_context_destroy(context);
  }
};

std::string cacheLayout(int64_t pageSize) {
  return pageSize > 0 ? "a paged cache (P=" + std::to_string(pageSize) + ")"
                      : std::string("a contiguous cache");
}

/// The `kv_scale` buffer's contents: fp8's f32 scale, mxfp4's block scales,
/// none for bf16.
std::pair<const void *, size_t> cacheScales(const DecodeProblem &p) {
  switch (p.format) {
  case CacheFormat::FP8:
    return {&p.fp8Scale, sizeof(float)};
  case CacheFormat::MXFP4:
    return {p.mxScales.data(), p.mxScales.size()};
  case CacheFormat::BF16:
    break;
  }
  return {nullptr, 0};
}

/// The plan of a contiguous or a paged launch (kv_indptr in pages).
mla_status createPlan(mla_kernel kernel, const DecodeProblem &p,
                      mla_plan *plan) {
  int32_t B = static_cast<int32_t>(p.numSeqs());
  if (p.paged())
    return mla_plan_create_paged(kernel, B, p.qoIndptr.data(),
                                 p.kvIndptr.data(), p.kvLastPageLen.data(),
                                 plan);
  return mla_plan_create(kernel, B, p.qoIndptr.data(), p.kvIndptr.data(), plan);
}

mla_backend backendKind() {
  return backend == "hip"    ? MLA_BACKEND_HIP
         : backend == "cuda" ? MLA_BACKEND_CUDA
         : backend == "emu"  ? MLA_BACKEND_EMU
                             : MLA_BACKEND_CPU;
}

/// The configuration flags; the cuda backend's target is sm_90a unless
/// --target names one.
DecodePipelineOptions configOptions() {
  DecodePipelineOptions options = config.options();
  if (backend == "cuda" && !config.targetGiven())
    options.target = defaultNVIDIATargetName().str();
  return options;
}

/// Opens the context and compiles (or reads) the artifact for problems
/// like `p`.
llvm::Error loadKernel(Handles &h, const DecodeProblem &p,
                       const KernelSignature &sig) {
  mla_backend kind = backendKind();
  CHECK_MLA(mla_context_create(kind, deviceOpt, &h.context),
            "creating the " + backend + " context");
  // Loading JIT-compiles the emu and cpu forms.
  const char *loading = kind == MLA_BACKEND_HIP ? "loading the code object"
                        : kind == MLA_BACKEND_CUDA
                            ? "loading the PTX (the driver JIT-compiles it)"
                        : kind == MLA_BACKEND_EMU
                            ? "loading the artifact (JIT-compiling the emu form)"
                            : "loading the artifact (lowering and JIT-compiling "
                              "the reference form)";
  if (!artifactPath.empty()) {
    auto phase = phases.phase(loading);
    CHECK_MLA(mla_kernel_load_file(h.context, artifactPath.c_str(), &h.kernel),
              "loading " + artifactPath);
    mla_kernel_info info{};
    CHECK_MLA(mla_kernel_get_info(h.kernel, &info), "reading the artifact");
    if (info.num_heads != p.numHeads || info.qk_dim != p.qkDim ||
        info.v_dim != p.vDim || (int)info.kv_format != (int)p.format)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the artifact computes H=" + llvm::Twine(info.num_heads) +
              " Dqk=" + llvm::Twine(info.qk_dim) + " Dv=" +
              llvm::Twine(info.v_dim) + " " +
              formatName(static_cast<CacheFormat>(info.kv_format)) +
              "; the inputs are H=" + llvm::Twine(p.numHeads) + " Dqk=" +
              llvm::Twine(p.qkDim) + " Dv=" + llvm::Twine(p.vDim) + " " +
              formatName(p.format));
    if (info.page_size != p.pageSize)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the artifact reads " + cacheLayout(info.page_size) +
              "; the inputs are " + cacheLayout(p.pageSize));
    if (info.sm_scale != static_cast<float>(p.effectiveSmScale()))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the artifact's softmax scale is " +
              llvm::formatv("{0}", info.sm_scale) + "; --sm-scale asks for " +
              llvm::formatv("{0}", p.effectiveSmScale()));
  } else {
    ArtifactForms forms;
    forms.gfx950 = kind == MLA_BACKEND_HIP || kind == MLA_BACKEND_CUDA;
    forms.emu = kind == MLA_BACKEND_EMU;
    forms.printIR = dumpIR;
    std::string bytes;
    {
      auto phase = phases.phase(
          llvm::Twine("compiling the artifact (") +
          (kind == MLA_BACKEND_CUDA ? "sm_90a PTX, "
           : forms.gfx950 ? "gfx950 code object, "
           : forms.emu  ? "emu form, "
                        : "") +
          "reference form)");
      auto artifact = compileArtifact(sig, forms);
      if (!artifact)
        return artifact.takeError();
      bytes = serializeArtifact(*artifact);
    }
    auto phase = phases.phase(loading);
    CHECK_MLA(mla_kernel_load_memory(h.context, bytes.data(), bytes.size(),
                                     &h.kernel),
              "loading the artifact");
  }
  if (kind == MLA_BACKEND_EMU) {
    CHECK_MLA(mla_emu_check_hazards(h.context, !noHazardCheck),
              "configuring the emu");
    CHECK_MLA(mla_emu_schedule_seed(h.context, emuScheduleSeed),
              "configuring the emu");
  }
  return llvm::Error::success();
}

/// Compiles (or reads) the artifact, plans, copies the inputs to the
/// device, launches --repeat times and copies the results back.
llvm::Expected<RunOutput> runThroughRuntime(const DecodeProblem &p,
                                            const KernelSignature &sig) {
  mla_backend kind = backendKind();
  Handles h;
  if (llvm::Error err = loadKernel(h, p, sig))
    return std::move(err);
  int32_t B = static_cast<int32_t>(p.numSeqs());
  CHECK_MLA(createPlan(h.kernel, p, &h.plan), "planning");
  mla_plan_info plan;
  CHECK_MLA(mla_plan_get_info(h.plan, &plan), "planning");
  std::vector<uint8_t> workList(plan.work_list_bytes);
  CHECK_MLA(mla_plan_get_work_list(h.plan, workList.data(), workList.size()),
            "planning");

  DeviceBuffers d;
  d.context = h.context;
  int64_t T = p.numTokens, H = p.numHeads;
  auto q = d.allocate(p.q.size() * 2, p.q.data(), false);
  auto kv = d.allocate(p.kv.size(), p.kv.data(), false);
  auto [scaleData, scaleBytes] = cacheScales(p);
  auto scale = d.allocate(scaleBytes, scaleData, false);
  auto qo = d.allocate(p.qoIndptr.size() * 4, p.qoIndptr.data(), false);
  auto kvp = d.allocate(p.kvIndptr.size() * 4, p.kvIndptr.data(), false);
  llvm::Expected<void *> ids = nullptr, last = nullptr;
  if (p.paged()) {
    // A table may hold no pages at all (every sequence empty): the launch
    // still gets a buffer.
    ids = d.allocate(std::max<size_t>(4, p.kvIndices.size() * 4),
                     p.kvIndices.empty() ? nullptr : p.kvIndices.data(), false);
    last =
        d.allocate(p.kvLastPageLen.size() * 4, p.kvLastPageLen.data(), false);
  }
  auto work = d.allocate(workList.size(), workList.data(), false);
  auto outBuf = d.allocate(T * H * p.vDim * 2, nullptr, true);
  auto lseBuf = d.allocate(T * H * 4, nullptr, true);
  auto workspace = d.allocate(plan.workspace_bytes, nullptr, true);
  for (auto *buffer : {&q, &kv, &scale, &qo, &kvp, &ids, &last, &work, &outBuf,
                       &lseBuf, &workspace})
    if (!*buffer)
      return buffer->takeError();

  mla_decode_args args{};
  args.q = *q;
  args.kv = *kv;
  args.kv_scale = scaleBytes ? *scale : nullptr;
  args.qo_indptr = static_cast<const int32_t *>(*qo);
  args.kv_indptr = static_cast<const int32_t *>(*kvp);
  args.kv_indices = static_cast<const int32_t *>(*ids); // NULL: contiguous
  args.kv_last_page_len = static_cast<const int32_t *>(*last);
  args.work_list = *work;
  args.out = *outBuf;
  args.lse = static_cast<float *>(*lseBuf);
  args.workspace = *workspace;
  args.workspace_bytes = plan.workspace_bytes;
  args.num_seqs = B;
  args.num_tokens = static_cast<int32_t>(T);
  args.num_kv_rows = static_cast<int32_t>(p.numRows);

  if (kvTraffic)
    CHECK_MLA(mla_emu_model_kv_traffic(h.context, 1),
              "modelling the cache traffic");
  std::vector<double> times;
  {
    auto launching = phases.phase(
        (kind == MLA_BACKEND_EMU ? "emulating " : "running ") +
        llvm::Twine(int(repeat)) + (repeat > 1 ? " launches" : " launch"));
    for (int i = 0; i < repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      CHECK_MLA(mla_launch(h.kernel, h.plan, &args, nullptr), "launching");
      CHECK_MLA(mla_synchronize(h.context, nullptr), "synchronizing");
      times.push_back(std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
  }
  if (repeat > 1) {
    std::sort(times.begin(), times.end());
    llvm::outs() << llvm::format("median_time_ms=%.3f over %d runs\n",
                                 times[times.size() / 2], (int)repeat);
  }
  if (kvTraffic) {
    mla_kv_traffic t;
    CHECK_MLA(mla_emu_kv_traffic(h.context, &t), "reading the cache traffic");
    // Readers of a byte on one XCD share its L2 only if they run together.
    bool together = t.max_slot_span < uint64_t(t.cus_per_xcd);
    double cache = std::max<double>(1.0, double(t.cache_bytes));
    llvm::outs() << llvm::format(
        "kv_traffic: cache_bytes=%llu dma_bytes=%llu (%.2f per byte, from L2 "
        "after the first) other_xcd_bytes=%llu max_slot_span=%llu "
        "(%d CUs per XCD, %d XCDs)\n",
        (unsigned long long)t.cache_bytes, (unsigned long long)t.dma_bytes,
        t.dma_bytes / cache, (unsigned long long)t.other_xcd_bytes,
        (unsigned long long)t.max_slot_span, t.cus_per_xcd, t.xcds);
    if (together)
      llvm::outs() << llvm::format(
          "kv_traffic: hbm_reads_per_byte=%.3f\n",
          (t.cache_bytes + t.other_xcd_bytes) / cache);
    else
      llvm::outs() << "kv_traffic: hbm_reads_per_byte unknown (readers of a "
                      "byte do not run together on its XCD)\n";
  }
  RunOutput result;
  result.out.resize(T * H * p.vDim);
  result.lse.resize(T * H);
  CHECK_MLA(mla_copy_to_host(h.context, result.out.data(), *outBuf,
                             result.out.size() * 2),
            "copying out");
  CHECK_MLA(mla_copy_to_host(h.context, result.lse.data(), *lseBuf,
                             result.lse.size() * 4),
            "copying out");
  return result;
}

/// The bar of the backend: the kernels' fixed one, or the reference
/// lowering's (cpu).
Tolerance toleranceFor(CacheFormat format, bool gfx950Kernels) {
  return gfx950Kernels ? kernelTolerance(format) : defaultTolerance(format);
}

/// The maxima a replay's device plan and buffers are sized from.
struct ReplayMaxima {
  int64_t seqs, kvLen, tokens, tableEntries, poolRows;
};

ReplayMaxima replayMaxima(const GenerateOptions &base) {
  ReplayMaxima m;
  m.seqs = base.batch > 0 ? base.batch : (int64_t)base.kvLens.size();
  m.kvLen = *std::max_element(base.kvLens.begin(), base.kvLens.end());
  m.tokens = m.seqs * kMaxQueryTokens;
  int64_t P = base.pageSize;
  if (P > 0) {
    // The generator's pool for the largest batch: its pages and a quarter.
    m.tableEntries = m.seqs * ((m.kvLen + P - 1) / P);
    m.poolRows = (m.tableEntries + std::max<int64_t>(1, m.tableEntries / 4)) * P;
  } else {
    m.tableEntries = 0;
    m.poolRows = std::max<int64_t>(1, m.seqs * m.kvLen);
  }
  return m;
}

/// One random step within the maxima: 1..seqs sequences, one q_len of
/// 1..4 for all (odd steps: one a sequence), lengths drawn from 0, 1, the
/// tile edges and the range.
GenerateOptions replayStep(const GenerateOptions &base, const ReplayMaxima &m,
                           std::mt19937_64 &rng, bool mixedQLens) {
  GenerateOptions step = base;
  step.batch = 0;
  step.seed = rng();
  int64_t qLen = 1 + int64_t(rng() % kMaxQueryTokens);
  int64_t seqs = 1 + int64_t(rng() % m.seqs);
  const int64_t edges[] = {0, 1, 63, 64, 65, 127, 128, 129, m.kvLen};
  step.kvLens.clear();
  step.qLens.clear();
  for (int64_t b = 0; b < seqs; ++b) {
    int64_t len = rng() % 2 ? edges[rng() % std::size(edges)]
                            : int64_t(rng() % (m.kvLen + 1));
    step.kvLens.push_back(std::min(len, m.kvLen));
    step.qLens.push_back(mixedQLens ? 1 + int64_t(rng() % kMaxQueryTokens)
                                    : qLen);
  }
  return step;
}

/// An indptr of `seqs` + 1 entries: the step's, then its last repeated (the
/// sequences past the step's batch are empty).
std::vector<int32_t> padIndptr(std::vector<int32_t> indptr, int64_t seqs) {
  indptr.resize(seqs + 1, indptr.back());
  return indptr;
}

/// The device buffers of a replay, sized from the maxima once; every
/// step rewrites their contents and launches with the same arguments.
struct ReplayBuffers {
  void *q, *kv, *scale, *qo, *kvp, *ids, *last, *work, *out, *lse, *workspace;
};

llvm::Expected<ReplayBuffers> allocateReplay(DeviceBuffers &d,
                                             const DecodeProblem &p,
                                             const ReplayMaxima &m,
                                             const mla_plan_info &plan) {
  size_t scaleBytes = p.format == CacheFormat::FP8     ? sizeof(float)
                      : p.format == CacheFormat::MXFP4 ? m.poolRows * p.qkDim / 32
                                                       : 1;
  size_t sizes[] = {
      size_t(m.tokens * p.numHeads * p.qkDim * 2),
      size_t(m.poolRows * p.rowBytes()),
      scaleBytes,
      size_t(m.seqs + 1) * 4,
      size_t(m.seqs + 1) * 4,
      size_t(std::max<int64_t>(1, m.tableEntries)) * 4,
      size_t(std::max<int64_t>(1, m.seqs)) * 4,
      plan.work_list_bytes,
      size_t(m.tokens * p.numHeads * p.vDim * 2),
      size_t(m.tokens * p.numHeads * 4),
      std::max<size_t>(1, plan.workspace_bytes)};
  void *ptrs[std::size(sizes)];
  for (size_t i = 0; i < std::size(sizes); ++i) {
    auto ptr = d.allocate(sizes[i], nullptr, true);
    if (!ptr)
      return ptr.takeError();
    ptrs[i] = *ptr;
  }
  return ReplayBuffers{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5],
                       ptrs[6], ptrs[7], ptrs[8], ptrs[9], ptrs[10]};
}

/// Writes a step's inputs into the replay's buffers and poisons its
/// outputs (NaN: a row the step leaves unwritten fails the check).
llvm::Error writeStep(mla_context ctx, const ReplayBuffers &r,
                      const DecodeProblem &p, const ReplayMaxima &m) {
  auto copy = [&](void *dst, const void *src, size_t bytes) -> llvm::Error {
    if (bytes == 0)
      return llvm::Error::success();
    CHECK_MLA(mla_copy_to_device(ctx, dst, src, bytes), "copying a step in");
    return llvm::Error::success();
  };
  std::vector<int32_t> qo = padIndptr(p.qoIndptr, m.seqs);
  std::vector<int32_t> kvp = padIndptr(p.kvIndptr, m.seqs);
  std::vector<int32_t> last = p.kvLastPageLen;
  last.resize(m.seqs, 0);
  std::vector<uint8_t> nan(m.tokens * p.numHeads * p.vDim * 2, 0xFF);
  auto [scale, scaleBytes] = cacheScales(p);
  for (auto [dst, src, bytes] :
       std::initializer_list<std::tuple<void *, const void *, size_t>>{
           {r.q, p.q.data(), p.q.size() * 2},
           {r.kv, p.kv.data(), p.kv.size()},
           {r.scale, scale, scaleBytes},
           {r.qo, qo.data(), qo.size() * 4},
           {r.kvp, kvp.data(), kvp.size() * 4},
           {r.ids, p.kvIndices.data(), p.kvIndices.size() * 4},
           {r.last, last.data(), p.paged() ? last.size() * 4 : 0},
           {r.out, nan.data(), nan.size()},
           {r.lse, nan.data(), size_t(m.tokens * p.numHeads * 4)}})
    if (llvm::Error err = copy(dst, src, bytes))
      return err;
  return llvm::Error::success();
}

/// --replay: one device plan and one set of buffers for `steps` random
/// batches, launched with identical arguments; a line per step. Returns
/// the exit code: 0 when every step passes, 2 otherwise.
llvm::Expected<int> runReplay(const GenerateOptions &base,
                              const KernelSignature &sig, int steps) {
  ReplayMaxima m = replayMaxima(base);
  std::mt19937_64 rng(base.seed);
  auto first = generateProblem(replayStep(base, m, rng, false));
  if (!first)
    return first.takeError();
  Handles h;
  if (llvm::Error err = loadKernel(h, *first, sig))
    return std::move(err);
  CHECK_MLA(mla_plan_create_device(h.kernel, int32_t(m.seqs),
                                   int32_t(m.tokens),
                                   int32_t(base.pageSize > 0 ? m.tableEntries
                                                             : m.poolRows),
                                   &h.plan),
            "making the device plan");
  mla_plan_info plan;
  CHECK_MLA(mla_plan_get_info(h.plan, &plan), "planning");
  DeviceBuffers d;
  d.context = h.context;
  auto r = allocateReplay(d, *first, m, plan);
  if (!r)
    return r.takeError();
  mla_decode_args args{};
  args.q = r->q;
  args.kv = r->kv;
  args.kv_scale = first->format == CacheFormat::BF16 ? nullptr : r->scale;
  args.qo_indptr = static_cast<const int32_t *>(r->qo);
  args.kv_indptr = static_cast<const int32_t *>(r->kvp);
  args.kv_indices = base.pageSize > 0 ? static_cast<int32_t *>(r->ids) : nullptr;
  args.kv_last_page_len =
      base.pageSize > 0 ? static_cast<int32_t *>(r->last) : nullptr;
  args.work_list = r->work;
  args.out = r->out;
  args.lse = static_cast<float *>(r->lse);
  args.workspace = r->workspace;
  args.workspace_bytes = plan.workspace_bytes;
  args.num_seqs = plan.num_seqs;
  args.num_tokens = plan.num_tokens;
  args.num_kv_rows = int32_t(m.poolRows);
  llvm::outs() << "replay: device plan for " << m.seqs << " sequences, "
               << m.tokens << " tokens, " << m.poolRows << " cache rows"
               << (base.pageSize > 0
                       ? " (" + std::to_string(m.tableEntries) + " page-table entries)"
                       : std::string())
               << ": work list " << plan.work_list_bytes << " bytes, workspace "
               << plan.workspace_bytes << " bytes\n";
  Tolerance tol = toleranceFor(first->format, true);
  int passed = 0;
  for (int s = 0; s < steps; ++s) {
    auto p = s == 0 ? std::move(first)
                    : generateProblem(replayStep(base, m, rng, s % 2 == 1));
    if (!p)
      return p.takeError();
    if (llvm::Error err = writeStep(h.context, *r, *p, m))
      return std::move(err);
    CHECK_MLA(mla_launch(h.kernel, h.plan, &args, nullptr), "launching");
    CHECK_MLA(mla_synchronize(h.context, nullptr), "synchronizing");
    int32_t status = -1;
    RunOutput got;
    got.out.resize(p->numTokens * p->numHeads * p->vDim);
    got.lse.resize(p->numTokens * p->numHeads);
    CHECK_MLA(mla_copy_to_host(h.context, &status,
                               static_cast<char *>(r->work) + plan.status_offset,
                               sizeof status),
              "reading the plan status");
    CHECK_MLA(mla_copy_to_host(h.context, got.out.data(), r->out,
                               got.out.size() * 2),
              "copying out");
    CHECK_MLA(mla_copy_to_host(h.context, got.lse.data(), r->lse,
                               got.lse.size() * 4),
              "copying out");
    ErrorReport report =
        compareWithReference(referenceDecode(*p), got.out, got.lse, tol);
    bool ok = status == 0 && report.passed(tol);
    passed += ok;
    std::string lens, qLens;
    for (int64_t b = 0; b < p->numSeqs(); ++b) {
      lens += (b ? "," : "") + std::to_string(p->kvLength(b));
      qLens += (b ? "," : "") +
               std::to_string(p->qoIndptr[b + 1] - p->qoIndptr[b]);
    }
    llvm::outs() << llvm::format("step %d: B=%lld q_len=[%s] kv=[%s] "
                                 "status=%d rel_err=%.3e lse_max_abs_err=%.3e %s\n",
                                 s, (long long)p->numSeqs(), qLens.c_str(),
                                 lens.c_str(), status, report.relErr,
                                 report.lseMaxAbsErr, ok ? "PASS" : "FAIL");
  }
  llvm::outs() << "replay: " << passed << "/" << steps << " steps passed\n";
  return passed == steps ? 0 : 2;
}
} // namespace

/// The generator's options from the flags (the decode's shape given).
static GenerateOptions generateOptions(CacheFormat format, int64_t numHeads,
                                       int64_t qkWidth, int64_t vWidth,
                                       int64_t rowsPerPage) {
  GenerateOptions opts;
  opts.format = format;
  opts.batch = batch;
  if (!kvLens.empty())
    opts.kvLens.assign(kvLens.begin(), kvLens.end());
  opts.numHeads = numHeads;
  opts.qkDim = qkWidth;
  opts.vDim = vWidth;
  opts.seed = seed;
  opts.outliers = outliers;
  opts.qScale = qScale;
  opts.pageSize = rowsPerPage;
  return opts;
}

/// The flag combinations mla-run refuses, as the message saying why.
static std::optional<std::string> flagConflict(bool split, bool emu) {
  if (generate == !inputsDir.empty())
    return "give exactly one of --generate and --inputs DIR";
  if (spareRows != 0 && !generate)
    return "--spare-rows shapes generated inputs; with --inputs the pool is "
           "kv.npy's rows";
  if (outliers != 0 && !generate)
    return "--outliers shapes generated inputs";
  if (pageSize != 0 && !generate)
    return "--page-size shapes generated inputs; with --inputs the page size "
           "is kv.npy's second dimension";
  if (repeat < 1)
    return "--repeat must be at least 1";
  if (kvTraffic && backend != "emu")
    return "--kv-traffic models the emu backend's launches; use --backend "
           "emu";
  if ((noHazardCheck || emuScheduleSeed != 0 || !testEmuHazard.empty()) &&
      backend != "emu")
    return "--no-hazard-check, --emu-schedule-seed and --test-emu-hazard "
           "configure the emu backend; use --backend emu";
  if (!split && !emu && config.anyGiven())
    return "the configuration flags (--target, --splits, --kv-tile, ...) "
           "configure the split pipeline (--pipeline split) or the GPU "
           "kernels (emu, hip, cuda); the decomposition has none";
  if (emu && split)
    return "the " + backend +
           " backend runs the GPU kernels; --pipeline "
           "chooses the cpu backend's";
  if (!artifactPath.empty() &&
      (split || config.anyGiven() || testCorruptLayout ||
       !testEmuHazard.empty() || dumpIR))
    return "--artifact runs a compiled artifact: --pipeline, the "
           "configuration flags and --dump-ir belong to mla-compile; "
           "--test-corrupt-mfma-layout and --test-emu-hazard build the "
           "kernels in memory";
  if (smScale < 0.0)
    return "--sm-scale must be positive";
  // A NaN or infinite Q would only compare NaN with NaN.
  if (!std::isfinite(qScale))
    return "--q-scale must be a finite number";
  return std::nullopt;
}

/// The decode the inputs describe: the flags', where an --artifact fixes
/// what the flags leave out (and then the runtime checks that they agree).
struct DecodeFacts {
  std::optional<CacheFormat> format;
  int64_t numHeads = heads, qkWidth = qkDim, vWidth = vDim;
  int64_t rowsPerPage = pageSize;
  double scale = smScale;
};

static llvm::Error takeArtifactFacts(DecodeFacts &facts) {
  auto artifact = readArtifactFile(artifactPath);
  if (!artifact) {
    rt::Error err = artifact.takeError();
    return llvm::createStringError(
        "loading " + artifactPath + ": " +
        mla_status_name(static_cast<mla_status>(err.status())) + ": " +
        err.message());
  }
  if (!facts.format)
    facts.format = artifact->format;
  if (!heads.getNumOccurrences())
    facts.numHeads = artifact->numHeads;
  if (!qkDim.getNumOccurrences())
    facts.qkWidth = artifact->qkDim;
  if (!vDim.getNumOccurrences())
    facts.vWidth = artifact->vDim;
  if (!smScale.getNumOccurrences())
    facts.scale = artifact->smScale;
  if (!pageSize.getNumOccurrences())
    facts.rowsPerPage = artifact->pageSize;
  return llvm::Error::success();
}

/// --replay: generated batches through a device plan, every step checked.
static int replaySteps(const DecodeFacts &facts) {
  if (replay < 0 || !generate || backend == "cpu")
    return fail("--replay N (N >= 1) runs generated batches through a device "
                "plan on the emu, hip or cuda backend (--generate --backend "
                "emu|hip|cuda)");
  if (!facts.format)
    return fail("--replay needs --format bf16|fp8|mxfp4 (or an --artifact)");
  if (repeat > 1 || kvTraffic || !saveInputs.empty() || !outPath.empty() ||
      !lsePath.empty() || noCheck || qLens.getNumOccurrences() || spareRows != 0)
    return fail("--replay draws each step's batch and q_len and checks every "
                "step: --repeat, --kv-traffic, --save-inputs, --out, --lse, "
                "--no-check, --q-len and --spare-rows do not apply");
  GenerateOptions opts =
      generateOptions(*facts.format, facts.numHeads, facts.qkWidth,
                      facts.vWidth, facts.rowsPerPage);
  if (kvLens.empty())
    opts.kvLens = {300};
  KernelSignature sig{*facts.format, facts.numHeads, facts.qkWidth,
                      facts.vWidth, facts.scale};
  sig.pageSize = facts.rowsPerPage;
  sig.config = configOptions();
  llvm::outs() << "mla-run: format=" << formatName(*facts.format)
               << " backend=" << backend << " replay=" << replay
               << " H=" << facts.numHeads;
  if (facts.rowsPerPage > 0)
    llvm::outs() << " P=" << facts.rowsPerPage;
  llvm::outs() << "\n";
  auto code = runReplay(opts, sig, replay);
  if (!code)
    return fail(code.takeError());
  return *code;
}

/// The problem to run: generated or read from --inputs, validated, and
/// saved where --save-inputs says.
static llvm::Expected<DecodeProblem> makeProblem(const DecodeFacts &facts) {
  DecodeProblem problem;
  if (generate) {
    if (!facts.format)
      return llvm::createStringError(
          "--generate needs --format bf16|fp8|mxfp4 (or an --artifact, whose "
          "format it takes)");
    GenerateOptions opts =
        generateOptions(*facts.format, facts.numHeads, facts.qkWidth,
                        facts.vWidth, facts.rowsPerPage);
    if (qLens.size() == 1)
      opts.qLen = qLens[0];
    else
      opts.qLens.assign(qLens.begin(), qLens.end());
    opts.spareRows = spareRows;
    auto generated = generateProblem(opts);
    if (!generated)
      return generated.takeError();
    problem = std::move(*generated);
  } else {
    auto loaded = loadProblem(inputsDir, facts.format, facts.vWidth);
    if (!loaded)
      return loaded.takeError();
    problem = std::move(*loaded);
  }
  problem.smScale = facts.scale;
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (!saveInputs.empty())
    if (llvm::Error err = saveProblem(problem, saveInputs))
      return std::move(err);
  return problem;
}

/// --out and --lse: the output and lse as float32 .npy files.
static llvm::Error writeResults(const DecodeProblem &problem,
                                const std::vector<uint16_t> &outBits,
                                const std::vector<float> &lse) {
  if (!outPath.empty()) {
    std::vector<float> values(outBits.size());
    for (size_t i = 0; i < outBits.size(); ++i)
      values[i] = bf16ToFloat(outBits[i]);
    if (llvm::Error err = writeNpy(
            outPath, "f4", {problem.numTokens, problem.numHeads, problem.vDim},
            values.data(), values.size() * 4))
      return err;
  }
  if (!lsePath.empty())
    return writeNpy(lsePath, "f4", {problem.numTokens, problem.numHeads},
                    lse.data(), lse.size() * 4);
  return llvm::Error::success();
}

/// Compares the results with the float64 reference and prints the
/// verdict: 0 when they are within the tolerance, 2 when not.
static int checkResults(const DecodeProblem &problem, bool emu,
                        const std::vector<uint16_t> &outBits,
                        const std::vector<float> &lse) {
  Tolerance tol = toleranceFor(problem.format, emu);
  ReferenceResult ref = [&] {
    auto phase = phases.phase("computing the float64 reference");
    return referenceDecode(problem);
  }();
  ErrorReport report = compareWithReference(ref, outBits, lse, tol);
  llvm::outs() << llvm::format(
      "rel_err=%.3e max_abs_err=%.3e lse_max_abs_err=%.3e\n", report.relErr,
      report.maxAbsErr, report.lseMaxAbsErr);
  llvm::outs() << llvm::format("tolerance: rel_err <= %.1e", tol.maxRelErr);
  if (tol.overRounding > 0.0)
    llvm::outs() << llvm::format(
        " or <= the reference's bf16 rounding (%.3e) + %.0e",
        report.roundingRelErr, tol.overRounding);
  double maxScale = 1.0;
  for (size_t i = 0; i < ref.out.size(); ++i)
    maxScale = std::max(maxScale, ref.absoluteScale(i));
  llvm::outs() << llvm::format(", |out - ref| <= %.0e * s + %.0e * |ref| "
                               "(s: the size of an output's terms, >= 1; "
                               "at most %.3g here), "
                               "|lse - ref| <= 1e-4 + 1e-6 * |ref|\n",
                               tol.atol, tol.rtol, maxScale);
  if (report.passed(tol)) {
    llvm::outs() << "PASS\n";
    return 0;
  }
  llvm::outs() << "FAIL: " << report.numOutOfTolerance
               << " output elements out of tolerance";
  if (report.firstBadIndex >= 0) {
    int64_t i = report.firstBadIndex, Dv = problem.vDim, H = problem.numHeads;
    llvm::outs() << llvm::format(
        " (first: token %lld head %lld col %lld: got %g, want %g, s %.3g)",
        (long long)(i / (H * Dv)), (long long)(i / Dv % H), (long long)(i % Dv),
        bf16ToFloat(outBits[i]), ref.out[i], ref.absoluteScale(i));
  }
  llvm::outs() << ", " << report.numLseMismatches << " lse mismatches\n";
  return 2;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mla::setVersionPrinter("mla-run");
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "mla-run: run mla.decode on a backend and check it "
      "against a float64 reference\n");
  phases.enable(verbose);

  DecodeFacts facts;
  if (!formatOpt.empty()) {
    facts.format = parseFormat(formatOpt);
    if (!facts.format)
      return fail("unknown --format '" + formatOpt + "' (bf16, fp8 or mxfp4)");
  }
  if (backend != "cpu" && backend != "emu" && backend != "hip" &&
      backend != "cuda")
    return fail("unknown --backend '" + backend +
                "' (available: cpu, emu, hip, cuda)");
  if (pipeline != "decompose" && pipeline != "split")
    return fail("unknown --pipeline '" + pipeline + "' (decompose or split)");
  bool split = pipeline == "split";
  // The GPU kernels (gfx950 on emu and hip, sm_90a on cuda).
  bool emu = backend == "emu" || backend == "hip" || backend == "cuda";
  if (std::optional<std::string> conflict = flagConflict(split, emu))
    return fail(*conflict);
  if (!artifactPath.empty())
    if (llvm::Error err = takeArtifactFacts(facts))
      return fail(std::move(err));
  if (replay != 0)
    return replaySteps(facts);

  auto problem = makeProblem(facts);
  if (!problem)
    return fail(problem.takeError());
  // The GPU kernels (emu, hip, cuda) are named by their architecture.
  DecodePipelineOptions options = configOptions();
  const TargetInfo *kernelTarget = lookupTarget(options.target);
  if (!kernelTarget) {
    std::string known;
    for (const TargetInfo &t : knownTargets())
      known += (known.empty() ? "" : ", ") + t.name.str();
    return fail("unknown target '" + options.target + "' (known: " + known +
                ")");
  }
  std::string kernelArch = kernelTarget->arch->arch.str();
  llvm::outs() << "mla-run: format=" << formatName(problem->format)
               << " backend=" << backend
               << " pipeline=" << (emu ? kernelArch : std::string(pipeline))
               << " B=" << problem->numSeqs() << " T=" << problem->numTokens
               << " H=" << problem->numHeads << " N=" << problem->numRows;
  if (problem->paged())
    llvm::outs() << " P=" << problem->pageSize;
  llvm::outs() << " Dqk=" << problem->qkDim << " Dv=" << problem->vDim << "\n";

  KernelSignature sig{problem->format, problem->numHeads, problem->qkDim,
                      problem->vDim, problem->smScale};
  sig.pageSize = problem->pageSize;
  if (split)
    sig.pipeline = HostPipeline::Split;
  if (split || emu)
    sig.config = options;
  sig.config.testCorruptLayout = testCorruptLayout;
  sig.config.testHazard = testEmuHazard;
  auto out = runThroughRuntime(*problem, sig);
  if (!out)
    return fail(out.takeError());
  if (llvm::Error err = writeResults(*problem, out->out, out->lse))
    return fail(std::move(err));
  if (noCheck)
    return 0;
  return checkResults(*problem, emu, out->out, out->lse);
}
