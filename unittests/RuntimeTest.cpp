//===- RuntimeTest.cpp - the C API: error paths, hip packing, threads -----===//

#include "mla/runtime.h"
#include "mla/runtime.hpp"

#include "mla/Compiler/ArtifactCompiler.h"
#include "mla/Emu/CacheTraffic.h"
#include "mla/Tools/Problem.h"
#include "mla/Tools/Reference.h"

#include "gtest/gtest.h"

#include <dlfcn.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>
#include <vector>

using namespace mla;

namespace {

std::string compile(const KernelSignature &sig) {
  auto artifact = compileArtifact(sig);
  if (!artifact) {
    ADD_FAILURE() << llvm::toString(artifact.takeError());
    return "";
  }
  return serializeArtifact(*artifact);
}

/// examples/decode_fp8.mlir compiled by mla-compile at build time (all
/// forms): compiling takes seconds, and each test is its own process.
std::string readArtifact(const char *path) {
  std::ifstream file(path, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(file), {});
  EXPECT_FALSE(bytes.empty()) << "cannot read " << path;
  return bytes;
}

const std::string &fp8Artifact() {
  static std::string bytes = readArtifact(MLA_TEST_FP8_ARTIFACT);
  return bytes;
}

/// examples/decode_fp8.mlir for the H200 (PTX and the emu form).
const std::string &fp8SM90aArtifact() {
  static std::string bytes = readArtifact(MLA_TEST_FP8_SM90A_ARTIFACT);
  return bytes;
}

/// examples/decode_fp8_paged.mlir: pages of 64 rows.
const std::string &fp8PagedArtifact() {
  static std::string bytes = readArtifact(MLA_TEST_FP8_PAGED_ARTIFACT);
  return bytes;
}

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/mla-runtime-test-" +
         std::to_string(::getpid()) + "-" + name;
}

std::string writeTemp(const std::string &name, const std::string &bytes) {
  std::string path = tempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

struct ContextGuard {
  mla_context context = nullptr;
  ~ContextGuard() {
    if (context)
      mla_context_destroy(context);
  }
};

mla_status load(mla_backend backend, const std::string &bytes,
                mla_context *context, mla_kernel *kernel) {
  mla_status status = mla_context_create(backend, 0, context);
  if (status != MLA_SUCCESS)
    return status;
  return mla_kernel_load_memory(*context, bytes.data(), bytes.size(), kernel);
}

/// A problem, its buffers in host memory (emu/cpu device memory) and args.
struct Launchable {
  DecodeProblem problem;
  std::vector<int32_t> workList;
  std::vector<uint16_t> out;
  std::vector<float> lse;
  std::vector<uint8_t> workspace;
  mla_decode_args args{};

  Launchable(mla_plan plan, DecodeProblem p) : problem(std::move(p)) {
    mla_plan_info info;
    EXPECT_EQ(mla_plan_get_info(plan, &info), MLA_SUCCESS);
    workList.resize(info.work_list_bytes / 4);
    EXPECT_EQ(mla_plan_get_work_list(plan, workList.data(),
                                     info.work_list_bytes),
              MLA_SUCCESS);
    out.assign(problem.numTokens * problem.numHeads * problem.vDim, 0xFFFF);
    lse.assign(problem.numTokens * problem.numHeads, std::nanf(""));
    workspace.assign(info.workspace_bytes, 0xFF);
    args.q = problem.q.data();
    args.kv = problem.kv.data();
    args.kv_scale = &problem.fp8Scale;
    args.qo_indptr = problem.qoIndptr.data();
    args.kv_indptr = problem.kvIndptr.data();
    args.work_list = workList.data();
    args.out = out.data();
    args.lse = lse.data();
    args.workspace = workspace.data();
    args.workspace_bytes = workspace.size();
    args.num_seqs = static_cast<int32_t>(problem.numSeqs());
    args.num_tokens = static_cast<int32_t>(problem.numTokens);
    args.num_kv_rows = static_cast<int32_t>(problem.numRows);
  }
};

DecodeProblem smallProblem(std::vector<int64_t> lens = {70, 200},
                           int64_t qLen = 2) {
  GenerateOptions options;
  options.format = CacheFormat::FP8;
  options.kvLens = std::move(lens);
  options.qLen = qLen;
  options.seed = 7;
  auto problem = generateProblem(options);
  EXPECT_TRUE(bool(problem));
  return std::move(*problem);
}

mla_plan plan(mla_kernel kernel, const DecodeProblem &p) {
  mla_plan result = nullptr;
  EXPECT_EQ(mla_plan_create(kernel, static_cast<int32_t>(p.numSeqs()),
                            p.qoIndptr.data(), p.kvIndptr.data(), &result),
            MLA_SUCCESS)
      << mla_last_error();
  return result;
}

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

TEST(Runtime, MissingFile) {
  ContextGuard g;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, &g.context), MLA_SUCCESS);
  mla_kernel kernel = reinterpret_cast<mla_kernel>(1);
  EXPECT_EQ(mla_kernel_load_file(g.context, "/nonexistent/decode.mla", &kernel),
            MLA_ERROR_IO);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_NE(std::string(mla_last_error()).find("/nonexistent/decode.mla"),
            std::string::npos)
      << mla_last_error();
}

TEST(Runtime, ArtifactRoundTrips) {
  const std::string &bytes = fp8Artifact();
  auto parsed = parseArtifact(bytes);
  ASSERT_TRUE(bool(parsed)) << parsed.takeError().message();
  EXPECT_EQ(serializeArtifact(*parsed), bytes);
  EXPECT_EQ(parsed->chip, "gfx950");
  ASSERT_EQ(parsed->kernels.size(), 3u);
  EXPECT_EQ(parsed->kernels[0].name, "mla_partial_decode");
  EXPECT_EQ(parsed->kernels[1].name, "mla_combine");
  EXPECT_EQ(parsed->kernels[0].args[0].name, "q");
  EXPECT_EQ(parsed->kernels[0].args[0].dims,
            (std::vector<std::string>{"num_tokens", "16", "576"}));
  // q's descriptor: 2 pointers, offset, 3 sizes, 3 strides = 9 words.
  EXPECT_EQ(parsed->kernels[0].args[0].fields.size(), 9u);
  EXPECT_FALSE(parsed->hsaco.empty());
  EXPECT_FALSE(parsed->emuModule.empty());
}

TEST(Runtime, TruncatedArtifact) {
  const std::string &bytes = fp8Artifact();
  ContextGuard g;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, &g.context), MLA_SUCCESS);
  // Every cut, coarse steps plus the last bytes: never loads, never crashes.
  std::vector<size_t> cuts = {0, 1, 100, 511, 512, 513};
  for (size_t n = 1024; n < bytes.size(); n += 7919)
    cuts.push_back(n);
  for (size_t k = 1; k <= 1030; ++k)
    cuts.push_back(bytes.size() - k);
  for (size_t n : cuts) {
    mla_kernel kernel = nullptr;
    mla_status status =
        mla_kernel_load_memory(g.context, bytes.data(), n, &kernel);
    EXPECT_EQ(status, MLA_ERROR_INVALID_ARTIFACT) << "cut at " << n;
    EXPECT_EQ(kernel, nullptr);
  }
  std::string path = writeTemp("truncated.mla", bytes.substr(0, bytes.size() / 2));
  mla_kernel kernel = nullptr;
  EXPECT_EQ(mla_kernel_load_file(g.context, path.c_str(), &kernel),
            MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("truncated"), std::string::npos)
      << mla_last_error();
  std::remove(path.c_str());
}

TEST(Runtime, CorruptedArtifact) {
  std::string bytes = fp8Artifact();
  ContextGuard g;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, &g.context), MLA_SUCCESS);
  auto loadCorrupt = [&](size_t at) {
    std::string copy = bytes;
    copy[at] ^= 0x5A;
    mla_kernel kernel = nullptr;
    mla_status status =
        mla_kernel_load_memory(g.context, copy.data(), copy.size(), &kernel);
    if (kernel)
      mla_kernel_destroy(kernel);
    return status;
  };
  // A byte of the code object (the member after the manifest's header and
  // data): the CRC-32 catches it.
  auto parsed = parseArtifact(bytes);
  ASSERT_TRUE(bool(parsed));
  size_t hsacoAt = bytes.find(parsed->hsaco.substr(0, 64));
  ASSERT_NE(hsacoAt, std::string::npos);
  EXPECT_EQ(loadCorrupt(hsacoAt + 1000), MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("CRC-32"), std::string::npos)
      << mla_last_error();
  // A tar header byte: its checksum catches it.
  EXPECT_EQ(loadCorrupt(10), MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("checksum"), std::string::npos)
      << mla_last_error();
  // Bytes spread over the whole archive: never a crash, never a success
  // unless the flipped byte was padding.
  for (size_t at = 0; at < bytes.size(); at += 4099) {
    mla_status status = loadCorrupt(at);
    EXPECT_TRUE(status == MLA_SUCCESS || status == MLA_ERROR_INVALID_ARTIFACT ||
                status == MLA_ERROR_VERSION_MISMATCH)
        << "byte " << at << ": " << mla_status_name(status);
  }
  // Garbage.
  std::string garbage(4096, '\x42');
  mla_kernel kernel = nullptr;
  EXPECT_EQ(mla_kernel_load_memory(g.context, garbage.data(), garbage.size(),
                                   &kernel),
            MLA_ERROR_INVALID_ARTIFACT);
}

TEST(Runtime, WrongVersion) {
  auto artifact = parseArtifact(fp8Artifact());
  ASSERT_TRUE(bool(artifact));
  artifact->version = kArtifactVersion + 1;
  std::string bytes = serializeArtifact(*artifact);
  ContextGuard g;
  mla_kernel kernel = nullptr;
  EXPECT_EQ(load(MLA_BACKEND_CPU, bytes, &g.context, &kernel),
            MLA_ERROR_VERSION_MISMATCH);
  EXPECT_NE(std::string(mla_last_error()).find("version 2"), std::string::npos)
      << mla_last_error();
}

TEST(Runtime, WrongTarget) {
  // Built for the host: the reference form only, which emu cannot run.
  KernelSignature sig{CacheFormat::FP8, 16, 576, 512};
  sig.config.target = "host";
  std::string bytes = compile(sig);
  ContextGuard g;
  mla_kernel kernel = nullptr;
  EXPECT_EQ(load(MLA_BACKEND_EMU, bytes, &g.context, &kernel),
            MLA_ERROR_TARGET_MISMATCH);
  EXPECT_NE(std::string(mla_last_error()).find("built for host"),
            std::string::npos)
      << mla_last_error();
}

TEST(Runtime, NoEmuForm) {
  ArtifactForms forms;
  forms.emu = forms.gfx950 = false;
  auto artifact = compileArtifact({CacheFormat::MXFP4, 16, 576, 512}, forms);
  ASSERT_TRUE(bool(artifact)) << llvm::toString(artifact.takeError());
  std::string bytes = serializeArtifact(*artifact);
  ContextGuard g;
  mla_kernel kernel = nullptr;
  EXPECT_EQ(load(MLA_BACKEND_EMU, bytes, &g.context, &kernel),
            MLA_ERROR_BACKEND_UNAVAILABLE);
}

/// Sequences with different query-token counts in one batch (1, 4, 2, 3):
/// each sequence has its own number of busy row blocks, token i of a
/// sequence its own causal end.
TEST(Runtime, MixedQueryLengthsOnEmu) {
  const std::vector<int64_t> qLens = {1, 4, 2, 3};
  for (CacheFormat format :
       {CacheFormat::FP8, CacheFormat::BF16, CacheFormat::MXFP4}) {
    GenerateOptions options;
    options.format = format;
    options.kvLens = {70, 1, 130, 5};
    options.qLen = 4;
    options.numHeads = 64;
    options.seed = 11;
    auto generated = generateProblem(options);
    ASSERT_TRUE(bool(generated)) << llvm::toString(generated.takeError());
    DecodeProblem p = std::move(*generated);
    // Keep the first q_len tokens of each sequence's four.
    int64_t tokenElems = p.numHeads * p.qkDim;
    std::vector<uint16_t> q;
    std::vector<int32_t> qo = {0};
    for (size_t b = 0; b < qLens.size(); ++b) {
      auto first = p.q.begin() + 4 * b * tokenElems;
      q.insert(q.end(), first, first + qLens[b] * tokenElems);
      qo.push_back(qo.back() + qLens[b]);
    }
    p.q = std::move(q);
    p.qoIndptr = qo;
    p.numTokens = qo.back();
    ASSERT_FALSE(bool(validateProblem(p)));

    ArtifactForms forms;
    forms.gfx950 = false;
    auto artifact = compileArtifact({format, 64, 576, 512}, forms);
    ASSERT_TRUE(bool(artifact)) << llvm::toString(artifact.takeError());
    ContextGuard g;
    mla_kernel kernel = nullptr;
    ASSERT_EQ(load(MLA_BACKEND_EMU, serializeArtifact(*artifact), &g.context,
                   &kernel),
              MLA_SUCCESS)
        << mla_last_error();
    mla_plan pl = plan(kernel, p);
    Launchable l(pl, p);
    if (format == CacheFormat::MXFP4)
      l.args.kv_scale = p.mxScales.data();
    else if (format == CacheFormat::BF16)
      l.args.kv_scale = nullptr;
    ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
        << mla_last_error();
    Tolerance tol = kernelTolerance(format);
    ErrorReport report =
        compareWithReference(referenceDecode(p), l.out, l.lse, tol);
    EXPECT_TRUE(report.passed(tol))
        << formatName(format) << ": rel_err " << report.relErr << ", "
        << report.numOutOfTolerance << " elements out of tolerance";
    mla_plan_destroy(pl);
    mla_kernel_destroy(kernel);
  }
}

/// The planner sizes work items by the workgroups each keeps busy: with
/// H = 128, q_len 4 needs 8 row blocks per item and q_len 1 needs 2.
TEST(Runtime, PlanCountsRowBlocks) {
  ArtifactForms forms;
  forms.gfx950 = false;
  auto artifact = compileArtifact({CacheFormat::FP8, 128, 576, 512}, forms);
  ASSERT_TRUE(bool(artifact)) << llvm::toString(artifact.takeError());
  std::string bytes = serializeArtifact(*artifact);
  auto parsed = parseArtifact(bytes);
  ASSERT_TRUE(bool(parsed)) << parsed.takeError().message();
  EXPECT_EQ(parsed->kernels[0].rowsPerWorkgroup, 64);
  EXPECT_EQ(parsed->kernels[0].headsPerBlock, 128);
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_EMU, bytes, &g.context, &kernel), MLA_SUCCESS)
      << mla_last_error();
  std::vector<int32_t> kvIndptr = {0, 8192, 16384, 24576, 32768};
  for (auto [qLen, items] : {std::pair<int32_t, int32_t>{4, 32}, {1, 128}}) {
    std::vector<int32_t> qoIndptr;
    for (int32_t b = 0; b <= 4; ++b)
      qoIndptr.push_back(b * qLen);
    mla_plan pl = nullptr;
    ASSERT_EQ(mla_plan_create(kernel, 4, qoIndptr.data(), kvIndptr.data(), &pl),
              MLA_SUCCESS)
        << mla_last_error();
    mla_plan_info info;
    ASSERT_EQ(mla_plan_get_info(pl, &info), MLA_SUCCESS);
    EXPECT_EQ(info.num_work_items, items) << "q_len " << qLen;
    mla_plan_destroy(pl);
  }
  mla_kernel_destroy(kernel);
}

/// The traffic model itself: 8 XCDs of 32 CUs, a 64-byte cache.
TEST(CacheTraffic, CountsReadsPerXCD) {
  std::vector<char> cache(64);
  emu::CacheReadTracker t(8, 32, /*modelTraffic=*/true);
  t.addRange("kv", cache.data(), 64);
  t.setWorkgroup(3); // XCD 3, slot 0
  t.read(cache.data(), 16);
  t.setWorkgroup(11); // XCD 3, slot 1: an L2 hit
  t.read(cache.data(), 16);
  t.setWorkgroup(4); // XCD 4: bytes 8..15 a second time from HBM
  t.read(cache.data() + 8, 16);
  t.setWorkgroup(3 + 8 * 40); // XCD 3, 40 slots after the first reader
  t.read(cache.data(), 2);
  const emu::CacheTraffic &r = t.result();
  EXPECT_EQ(r.cacheBytes, 24u);   // bytes 0..23
  EXPECT_EQ(r.dmaBytes, 50u);     // 16 + 16 + 16 + 2
  EXPECT_EQ(r.otherXcdBytes, 8u); // bytes 8..15 on XCD 4
  EXPECT_EQ(r.maxSlotSpan, 40u);
  EXPECT_FALSE(t.outOfBounds());
  t.setWorkgroup(5);
  t.read(cache.data() + 60, 16); // past the end
  ASSERT_TRUE(t.outOfBounds());
  EXPECT_EQ(*t.outOfBounds(), "workgroup 5 DMA'd 16 bytes outside the cache "
                              "(kv at byte offset 60 of 64)");
  EXPECT_EQ(t.result().dmaBytes, 50u);
}

TEST(Runtime, EmuRejectsDMAOutsideTheCache) {
  // A manifest that describes the cache as 7 rows: the kernel's DMA of the
  // real rows falls outside it, and the emu says so instead of reading on.
  auto artifact = parseArtifact(fp8Artifact());
  ASSERT_TRUE(bool(artifact)) << artifact.takeError().message();
  for (ArtifactKernelArg &arg : artifact->kernels[0].args)
    if (arg.name == "kv")
      arg.dims[0] = "7";
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_EMU, serializeArtifact(*artifact), &g.context,
                 &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem({70, 1}, 1);
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);
  EXPECT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(std::string(mla_last_error()).find("outside the cache (kv at"),
            std::string::npos)
      << mla_last_error();
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
}

//===----------------------------------------------------------------------===//
// Null pointers and bad values
//===----------------------------------------------------------------------===//

TEST(Runtime, NullPointers) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_CPU, fp8Artifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem();
  mla_plan okPlan = plan(kernel, p);
  int32_t indptr[2] = {0, 1};
  void *ptr = nullptr;
  mla_plan_info planInfo;
  mla_kernel_info kernelInfo;
  mla_decode_args args{};
  const char *arch = nullptr;
  mla_context ctx = nullptr;
  mla_kernel k = nullptr;
  mla_plan pl = nullptr;
  const mla_status invalid = MLA_ERROR_INVALID_ARGUMENT;
  EXPECT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, nullptr), invalid);
  EXPECT_EQ(mla_context_create(static_cast<mla_backend>(7), 0, &ctx), invalid);
  EXPECT_EQ(mla_context_destroy(nullptr), invalid);
  EXPECT_EQ(mla_context_arch(nullptr, &arch), invalid);
  EXPECT_EQ(mla_context_arch(g.context, nullptr), invalid);
  EXPECT_EQ(mla_malloc(nullptr, 16, &ptr), invalid);
  EXPECT_EQ(mla_malloc(g.context, 16, nullptr), invalid);
  EXPECT_EQ(mla_free(nullptr, ptr), invalid);
  EXPECT_EQ(mla_free(g.context, nullptr), MLA_SUCCESS);
  EXPECT_EQ(mla_copy_to_device(g.context, nullptr, indptr, 8), invalid);
  EXPECT_EQ(mla_copy_to_host(g.context, indptr, nullptr, 8), invalid);
  EXPECT_EQ(mla_synchronize(nullptr, nullptr), invalid);
  EXPECT_EQ(mla_kernel_load_file(nullptr, "x", &k), invalid);
  EXPECT_EQ(mla_kernel_load_file(g.context, nullptr, &k), invalid);
  EXPECT_EQ(mla_kernel_load_file(g.context, "x", nullptr), invalid);
  EXPECT_EQ(mla_kernel_load_memory(g.context, nullptr, 10, &k), invalid);
  EXPECT_EQ(mla_kernel_destroy(nullptr), invalid);
  EXPECT_EQ(mla_kernel_get_info(nullptr, &kernelInfo), invalid);
  EXPECT_EQ(mla_kernel_get_info(kernel, nullptr), invalid);
  EXPECT_EQ(mla_plan_create(nullptr, 1, indptr, indptr, &pl), invalid);
  EXPECT_EQ(mla_plan_create(kernel, 1, nullptr, indptr, &pl), invalid);
  EXPECT_EQ(mla_plan_create(kernel, 1, indptr, nullptr, &pl), invalid);
  EXPECT_EQ(mla_plan_create(kernel, 1, indptr, indptr, nullptr), invalid);
  EXPECT_EQ(mla_plan_destroy(nullptr), invalid);
  EXPECT_EQ(mla_plan_get_info(nullptr, &planInfo), invalid);
  EXPECT_EQ(mla_plan_get_info(okPlan, nullptr), invalid);
  EXPECT_EQ(mla_plan_get_work_list(nullptr, indptr, 8), invalid);
  EXPECT_EQ(mla_plan_get_work_list(okPlan, nullptr, 8), invalid);
  EXPECT_EQ(mla_plan_get_work_list(okPlan, indptr, 1), invalid);
  EXPECT_EQ(mla_launch(nullptr, okPlan, &args, nullptr), invalid);
  EXPECT_EQ(mla_launch(kernel, nullptr, &args, nullptr), invalid);
  EXPECT_EQ(mla_launch(kernel, okPlan, nullptr, nullptr), invalid);
  // Null buffers in the arguments, one at a time.
  Launchable l(okPlan, p);
  std::vector<std::function<void(mla_decode_args &)>> clearers = {
      [](mla_decode_args &a) { a.q = nullptr; },
      [](mla_decode_args &a) { a.kv = nullptr; },
      [](mla_decode_args &a) { a.kv_scale = nullptr; },
      [](mla_decode_args &a) { a.qo_indptr = nullptr; },
      [](mla_decode_args &a) { a.kv_indptr = nullptr; },
      [](mla_decode_args &a) { a.out = nullptr; },
      [](mla_decode_args &a) { a.lse = nullptr; }};
  for (auto &clear : clearers) {
    mla_decode_args copy = l.args;
    clear(copy);
    EXPECT_EQ(mla_launch(kernel, okPlan, &copy, nullptr), invalid);
    EXPECT_NE(std::string(mla_last_error()).find("is NULL"), std::string::npos);
  }
  EXPECT_EQ(mla_launch(kernel, okPlan, &l.args, nullptr), MLA_SUCCESS)
      << mla_last_error();
  mla_plan_destroy(okPlan);
  mla_kernel_destroy(kernel);
}

TEST(Runtime, BadIndptrs) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_CPU, fp8Artifact(), &g.context, &kernel),
            MLA_SUCCESS);
  mla_plan p = nullptr;
  int32_t qo5[2] = {0, 5}, kv[2] = {0, 10}, qo[2] = {0, 1}, kvDown[3] = {0, 10, 5},
          qo2[3] = {0, 1, 2}, start1[2] = {1, 2};
  EXPECT_EQ(mla_plan_create(kernel, 1, qo5, kv, &p), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mla_last_error()).find("5 query tokens"),
            std::string::npos);
  EXPECT_EQ(mla_plan_create(kernel, 2, qo2, kvDown, &p),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mla_plan_create(kernel, 1, start1, kv, &p),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mla_plan_create(kernel, -1, qo, kv, &p), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  mla_kernel_destroy(kernel);
}

//===----------------------------------------------------------------------===//
// Plans and launches
//===----------------------------------------------------------------------===//

TEST(Runtime, WorkspaceTooSmallAndSizeMismatch) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_EMU, fp8Artifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem();
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);
  mla_decode_args args = l.args;
  args.workspace_bytes -= 1;
  EXPECT_EQ(mla_launch(kernel, pl, &args, nullptr),
            MLA_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_NE(std::string(mla_last_error()).find("the plan needs"),
            std::string::npos);
  for (int field = 0; field < 2; ++field) {
    args = l.args;
    (field == 0 ? args.num_seqs : args.num_tokens) += 1;
    EXPECT_EQ(mla_launch(kernel, pl, &args, nullptr), MLA_ERROR_SIZE_MISMATCH);
  }
  // A cache smaller than the batch's rows.
  args = l.args;
  args.num_kv_rows -= 1;
  EXPECT_EQ(mla_launch(kernel, pl, &args, nullptr), MLA_ERROR_SIZE_MISMATCH);
  EXPECT_NE(std::string(mla_last_error()).find("the plan's batch uses 270"),
            std::string::npos)
      << mla_last_error();
  // A plan of another kernel.
  mla_kernel other = nullptr;
  ASSERT_EQ(mla_kernel_load_memory(g.context, fp8Artifact().data(),
                                   fp8Artifact().size(), &other),
            MLA_SUCCESS);
  EXPECT_EQ(mla_launch(other, pl, &l.args, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  // Nothing was written by the failed launches.
  for (uint16_t bits : l.out)
    ASSERT_EQ(bits, 0xFFFF);
  mla_kernel_destroy(other);
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
}

/// A cache pool larger than the batch (as serving engines keep it): rows
/// past kv_indptr[B] hold NaN codes and are never read, and one plan serves
/// pools of any size. Once a launch took the pool's N as a size mismatch.
TEST(Runtime, PoolLargerThanTheBatch) {
  GenerateOptions options;
  options.format = CacheFormat::FP8;
  options.kvLens = {70, 0, 200};
  options.qLen = 2;
  options.seed = 9;
  options.spareRows = 333;
  auto problem = generateProblem(options);
  ASSERT_TRUE(bool(problem)) << llvm::toString(problem.takeError());
  DecodeProblem &p = *problem;
  ASSERT_EQ(p.numRows, 270 + 333);
  ASSERT_EQ(p.kv.back(), 0xFF);
  for (mla_backend backend : {MLA_BACKEND_EMU, MLA_BACKEND_CPU}) {
    ContextGuard g;
    mla_kernel kernel = nullptr;
    ASSERT_EQ(load(backend, fp8Artifact(), &g.context, &kernel), MLA_SUCCESS)
        << mla_last_error();
    mla_plan pl = plan(kernel, p);
    mla_plan_info info;
    ASSERT_EQ(mla_plan_get_info(pl, &info), MLA_SUCCESS);
    EXPECT_EQ(info.num_kv_rows, 270);
    Tolerance tol = defaultTolerance(p.format);
    tol.maxRelErr = 5e-3;
    ReferenceResult ref = referenceDecode(p);
    // The whole pool, then only the batch's rows: the same plan, the same
    // numbers.
    std::vector<uint16_t> first;
    for (int32_t rows : {int32_t(p.numRows), int32_t(270)}) {
      Launchable l(pl, p);
      l.args.num_kv_rows = rows;
      ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
          << mla_last_error();
      ErrorReport report = compareWithReference(ref, l.out, l.lse, tol);
      EXPECT_TRUE(report.passed(tol))
          << "backend " << backend << ", " << rows << " rows: rel_err "
          << report.relErr << ", " << report.numOutOfTolerance
          << " elements out of tolerance";
      if (first.empty())
        first = l.out;
      else
        EXPECT_EQ(first, l.out);
    }
    mla_plan_destroy(pl);
    mla_kernel_destroy(kernel);
  }
}

/// A paged kernel: planned from the page table's lengths, launched with
/// the ids; plans and launches that mix the forms, bad last page lengths
/// and pools that are not whole pages are refused before anything runs.
TEST(Runtime, PagedPlansAndLaunches) {
  GenerateOptions options;
  options.format = CacheFormat::FP8;
  options.kvLens = {70, 0, 200, 64};
  options.qLen = 3;
  options.seed = 5;
  options.pageSize = 64;
  auto problem = generateProblem(options);
  ASSERT_TRUE(bool(problem)) << llvm::toString(problem.takeError());
  DecodeProblem &p = *problem;
  auto numSeqs = static_cast<int32_t>(p.numSeqs());
  ReferenceResult ref = referenceDecode(p);
  Tolerance tol = defaultTolerance(p.format);
  tol.maxRelErr = 5e-3;
  for (mla_backend backend : {MLA_BACKEND_EMU, MLA_BACKEND_CPU}) {
    ContextGuard g;
    mla_kernel kernel = nullptr;
    ASSERT_EQ(load(backend, fp8PagedArtifact(), &g.context, &kernel),
              MLA_SUCCESS)
        << mla_last_error();
    mla_kernel_info info;
    ASSERT_EQ(mla_kernel_get_info(kernel, &info), MLA_SUCCESS);
    EXPECT_EQ(info.page_size, 64);
    mla_plan pl = nullptr;
    EXPECT_EQ(mla_plan_create(kernel, numSeqs, p.qoIndptr.data(),
                              p.kvIndptr.data(), &pl),
              MLA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mla_last_error()).find("mla_plan_create_paged"),
              std::string::npos);
    std::vector<int32_t> badLast = p.kvLastPageLen;
    badLast[0] = 65;
    EXPECT_EQ(mla_plan_create_paged(kernel, numSeqs, p.qoIndptr.data(),
                                    p.kvIndptr.data(), badLast.data(), &pl),
              MLA_ERROR_INVALID_ARGUMENT);
    badLast = p.kvLastPageLen;
    badLast[1] = 1; // sequence 1 has no pages
    EXPECT_EQ(mla_plan_create_paged(kernel, numSeqs, p.qoIndptr.data(),
                                    p.kvIndptr.data(), badLast.data(), &pl),
              MLA_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(pl, nullptr);
    ASSERT_EQ(mla_plan_create_paged(kernel, numSeqs, p.qoIndptr.data(),
                                    p.kvIndptr.data(), p.kvLastPageLen.data(),
                                    &pl),
              MLA_SUCCESS)
        << mla_last_error();
    mla_plan_info planInfo;
    ASSERT_EQ(mla_plan_get_info(pl, &planInfo), MLA_SUCCESS);
    EXPECT_EQ(planInfo.num_kv_rows, 0); // the pool's rows are the launch's
    Launchable l(pl, p);
    l.args.kv_indices = p.kvIndices.data();
    l.args.kv_last_page_len = p.kvLastPageLen.data();
    mla_decode_args args = l.args;
    args.kv_indices = nullptr;
    EXPECT_EQ(mla_launch(kernel, pl, &args, nullptr),
              MLA_ERROR_INVALID_ARGUMENT);
    args = l.args;
    args.num_kv_rows -= 1;
    EXPECT_EQ(mla_launch(kernel, pl, &args, nullptr),
              MLA_ERROR_SIZE_MISMATCH);
    EXPECT_NE(std::string(mla_last_error()).find("multiple of the page size"),
              std::string::npos)
        << mla_last_error();
    for (uint16_t bits : l.out)
      ASSERT_EQ(bits, 0xFFFF);
    ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
        << mla_last_error();
    ErrorReport report = compareWithReference(ref, l.out, l.lse, tol);
    EXPECT_TRUE(report.passed(tol))
        << "backend " << backend << ": rel_err " << report.relErr << ", "
        << report.numOutOfTolerance << " elements out of tolerance";
    mla_plan_destroy(pl);

    // A contiguous kernel takes no page table.
    mla_kernel flat = nullptr;
    ASSERT_EQ(mla_kernel_load_memory(g.context, fp8Artifact().data(),
                                     fp8Artifact().size(), &flat),
              MLA_SUCCESS);
    EXPECT_EQ(mla_plan_create_paged(flat, numSeqs, p.qoIndptr.data(),
                                    p.kvIndptr.data(), p.kvLastPageLen.data(),
                                    &pl),
              MLA_ERROR_INVALID_ARGUMENT);
    mla_kernel_destroy(flat);
    mla_kernel_destroy(kernel);
  }
}

/// Eight threads share one context, kernel and plan, each with its own
/// output and workspace: every result equals the single-thread one, bit for
/// bit, and is within the emu bar of the float64 reference.
TEST(Runtime, ConcurrentEmuLaunches) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_EMU, fp8Artifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem({70, 1, 200}, 2);
  mla_plan pl = plan(kernel, p);
  Launchable single(pl, p);
  ASSERT_EQ(mla_launch(kernel, pl, &single.args, nullptr), MLA_SUCCESS)
      << mla_last_error();
  Tolerance tol = defaultTolerance(CacheFormat::FP8);
  tol.maxRelErr = 5e-3;
  ErrorReport report =
      compareWithReference(referenceDecode(p), single.out, single.lse, tol);
  EXPECT_TRUE(report.passed(tol)) << "rel_err " << report.relErr;

  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<Launchable>> runs;
  for (int t = 0; t < kThreads; ++t)
    runs.push_back(std::make_unique<Launchable>(pl, p));
  std::vector<mla_status> statuses(kThreads, MLA_ERROR_INTERNAL);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      statuses[t] = mla_launch(kernel, pl, &runs[t]->args, nullptr);
    });
  for (std::thread &t : threads)
    t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(statuses[t], MLA_SUCCESS);
    EXPECT_EQ(runs[t]->out, single.out) << "thread " << t;
    EXPECT_EQ(0, std::memcmp(runs[t]->lse.data(), single.lse.data(),
                             single.lse.size() * sizeof(float)))
        << "thread " << t;
  }
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
}

TEST(Runtime, SizeExpressions) {
  std::vector<std::pair<std::string_view, int64_t>> symbols = {
      {"num_work_items", 13}, {"num_sequences", 3}};
  auto value = [&](std::string_view entry) -> int64_t {
    auto v = resolveDim(entry, symbols);
    return v ? *v : -1;
  };
  EXPECT_EQ(value("576"), 576);
  EXPECT_EQ(value("num_sequences"), 3);
  EXPECT_EQ(value("roundup(num_work_items,8)"), 16);
  EXPECT_EQ(value("roundup(num_work_items,8)*8"), 128);
  EXPECT_EQ(value("num_sequences*2*num_work_items"), 78);
  EXPECT_EQ(value("roundup(num_sequences,1)"), 3);
  EXPECT_EQ(value("num_heads"), -1);
  EXPECT_EQ(value("roundup(num_work_items,0)"), -1);
  EXPECT_EQ(value("roundup(num_work_items)"), -1);
  EXPECT_EQ(value("num_sequences*"), -1);
  EXPECT_EQ(value("-3"), -1);
  EXPECT_EQ(value("num_work_items*2147483647"), -1);
  EXPECT_EQ(value("roundup(num_work_items,99999999999)"), -1);
  EXPECT_EQ(value("roundup(9223372036854775807,8)"), -1);
}

TEST(Runtime, EmuKVTrafficModel) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_EMU, fp8Artifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  mla_kv_traffic t;
  EXPECT_EQ(mla_emu_kv_traffic(g.context, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(mla_emu_model_kv_traffic(g.context, 1), MLA_SUCCESS);
  DecodeProblem p = smallProblem({70, 1, 200}, 2);
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
        << mla_last_error();
  ASSERT_EQ(mla_emu_kv_traffic(g.context, &t), MLA_SUCCESS);
  // Every row of the cache, twice (two launches), each byte on one XCD.
  EXPECT_EQ(t.cache_bytes, 2u * 271 * 576);
  EXPECT_GE(t.dma_bytes, t.cache_bytes);
  EXPECT_EQ(t.other_xcd_bytes, 0u);
  EXPECT_EQ(t.xcds, 8);
  EXPECT_EQ(t.cus_per_xcd, 32);
  // Enabling again starts from zero; disabled, launches add nothing.
  ASSERT_EQ(mla_emu_model_kv_traffic(g.context, 1), MLA_SUCCESS);
  ASSERT_EQ(mla_emu_model_kv_traffic(g.context, 0), MLA_SUCCESS);
  ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS);
  ASSERT_EQ(mla_emu_kv_traffic(g.context, &t), MLA_SUCCESS);
  EXPECT_EQ(t.cache_bytes, 0u);
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);

  // Only the emu backend models traffic.
  ContextGuard cpu;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, &cpu.context), MLA_SUCCESS);
  EXPECT_EQ(mla_emu_model_kv_traffic(cpu.context, 1),
            MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mla_last_error()).find("only the emu backend"),
            std::string::npos);
  EXPECT_EQ(mla_emu_kv_traffic(cpu.context, &t), MLA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mla_emu_model_kv_traffic(nullptr, 1), MLA_ERROR_INVALID_ARGUMENT);
}

TEST(Runtime, CppWrapper) {
  namespace rt = mla::runtime;
  rt::Context context(MLA_BACKEND_CPU);
  EXPECT_EQ(context.arch(), "host");
  rt::Kernel kernel =
      rt::Kernel::fromMemory(context, fp8Artifact().data(), fp8Artifact().size());
  EXPECT_EQ(kernel.info().num_heads, 16);
  EXPECT_STREQ(kernel.info().target, "gfx950");
  try {
    rt::Plan bad(kernel, {0, 9}, {0, 3});
    FAIL() << "a 9-token sequence was planned";
  } catch (const rt::Error &e) {
    EXPECT_EQ(e.status(), MLA_ERROR_INVALID_ARGUMENT);
  }
  DecodeProblem p = smallProblem();
  rt::Plan plan(kernel, p.qoIndptr, p.kvIndptr);
  Launchable l(plan.get(), p);
  rt::launch(kernel, plan, l.args);
  Tolerance tol = defaultTolerance(CacheFormat::FP8);
  EXPECT_TRUE(compareWithReference(referenceDecode(p), l.out, l.lse, tol)
                  .passed(tol));
  // A paged kernel's plan, and the sizes checked before the C call.
  rt::Kernel paged = rt::Kernel::fromMemory(context, fp8PagedArtifact().data(),
                                            fp8PagedArtifact().size());
  EXPECT_EQ(paged.info().page_size, 64);
  EXPECT_EQ(rt::Plan(paged, {0, 1, 2}, {0, 2, 2}, {5, 0}).info().num_seqs, 2);
  try {
    rt::Plan bad(paged, {0, 1}, {0, 1}, {});
    FAIL() << "a plan without last page lengths";
  } catch (const rt::Error &e) {
    EXPECT_EQ(e.status(), MLA_ERROR_INVALID_ARGUMENT);
  }
}

//===----------------------------------------------------------------------===//
// The hip backend, without a GPU
//===----------------------------------------------------------------------===//

TEST(Runtime, NoHipLibrary) {
  ::setenv("MLA_HIP_LIBRARY", "/nonexistent/libamdhip64.so", 1);
  mla_context context = nullptr;
  EXPECT_EQ(mla_context_create(MLA_BACKEND_HIP, 0, &context),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_EQ(context, nullptr);
  EXPECT_NE(std::string(mla_last_error()).find("cannot load the HIP runtime"),
            std::string::npos)
      << mla_last_error();
  ::unsetenv("MLA_HIP_LIBRARY");
}

struct FakeHip : ::testing::Test {
  void SetUp() override {
    ::setenv("MLA_HIP_LIBRARY", MLA_FAKE_HIP_PATH, 1);
    ::unsetenv("FAKE_HIP_DEVICE_COUNT");
    ::unsetenv("FAKE_HIP_ARCH");
  }
  void TearDown() override { ::unsetenv("MLA_HIP_LIBRARY"); }
};

TEST_F(FakeHip, NoDevice) {
  ::setenv("FAKE_HIP_DEVICE_COUNT", "0", 1);
  mla_context context = nullptr;
  EXPECT_EQ(mla_context_create(MLA_BACKEND_HIP, 0, &context),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(mla_last_error()).find("no AMD GPU"), std::string::npos)
      << mla_last_error();
  ::setenv("FAKE_HIP_DEVICE_COUNT", "1", 1);
  EXPECT_EQ(mla_context_create(MLA_BACKEND_HIP, 3, &context),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(mla_last_error()).find("no GPU 3"), std::string::npos)
      << mla_last_error();
}

TEST_F(FakeHip, WrongDevice) {
  ::setenv("FAKE_HIP_ARCH", "gfx942:sramecc+:xnack-", 1);
  ContextGuard g;
  mla_kernel kernel = nullptr;
  EXPECT_EQ(load(MLA_BACKEND_HIP, fp8Artifact(), &g.context, &kernel),
            MLA_ERROR_TARGET_MISMATCH);
  EXPECT_STREQ(mla_last_error(), "the artifact is built for gfx950, but GPU 0 "
                                 "is gfx942; recompile it for gfx942");
}

/// The kernarg buffer the hip backend packs holds every memref descriptor
/// word at the offset the code object's metadata gave it.
TEST_F(FakeHip, PacksKernelArgumentsFromMetadata) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_HIP, fp8Artifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  const char *arch = nullptr;
  ASSERT_EQ(mla_context_arch(g.context, &arch), MLA_SUCCESS);
  EXPECT_STREQ(arch, "gfx950");
  DecodeProblem p = smallProblem({70, 300}, 3);
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);

  void *fake = dlopen(MLA_FAKE_HIP_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr);
  auto count = reinterpret_cast<int (*)()>(dlsym(fake, "fakeHipLaunchCount"));
  auto get = reinterpret_cast<const char *(*)(int, unsigned *, unsigned *,
                                              const uint8_t **, size_t *)>(
      dlsym(fake, "fakeHipLaunch"));
  ASSERT_TRUE(count && get);
  int before = count();
  ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
      << mla_last_error();
  ASSERT_EQ(count(), before + 2);

  auto artifact = parseArtifact(fp8Artifact());
  ASSERT_TRUE(bool(artifact));
  mla_plan_info info;
  mla_plan_get_info(pl, &info);
  for (int k = 0; k < 2; ++k) {
    unsigned grid[3], block[3];
    const uint8_t *kernarg;
    size_t bytes;
    std::string name = get(before + k, grid, block, &kernarg, &bytes);
    const ArtifactKernel &desc = artifact->kernels[k];
    EXPECT_EQ(name, desc.name);
    EXPECT_EQ(block[0], 256u);
    // The partial kernel: the persistent grid, one workgroup per CU; the
    // combine: one workgroup per sequence.
    EXPECT_EQ(grid[0], k == 0 ? 256u : 2u);
    EXPECT_EQ(bytes, (size_t)desc.kernargBytes);
    for (const ArtifactKernelArg &arg : desc.args) {
      auto word = [&](size_t w) {
        int64_t value = 0;
        std::memcpy(&value, kernarg + arg.fields[w].first, 8);
        return value;
      };
      const void *expected =
          arg.name == "q"             ? l.args.q
          : arg.name == "kv"          ? l.args.kv
          : arg.name == "out"         ? l.args.out
          : arg.name == "lse"         ? (const void *)l.args.lse
          : arg.name == "work_items"  ? l.args.work_list
          : arg.name == "partial_out" ? l.args.workspace
                                      : nullptr;
      if (expected) {
        EXPECT_EQ(word(0), reinterpret_cast<int64_t>(expected)) << arg.name;
        EXPECT_EQ(word(1), reinterpret_cast<int64_t>(expected)) << arg.name;
      }
      EXPECT_EQ(word(2), 0) << arg.name; // offset
      if (arg.name == "q") {
        EXPECT_EQ(word(3), p.numTokens); // sizes [T, 16, 576]
        EXPECT_EQ(word(4), 16);
        EXPECT_EQ(word(6), 16 * 576); // strides
        EXPECT_EQ(word(8), 1);
      }
      if (arg.name == "item_indptr") {
        EXPECT_EQ(word(0), reinterpret_cast<int64_t>(
                               static_cast<const int32_t *>(l.args.work_list) +
                               4 * info.num_work_items));
      }
    }
  }
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
}

} // namespace

//===----------------------------------------------------------------------===//
// Failure injection: every driver call of the hip backend fails in turn
//===----------------------------------------------------------------------===//

namespace {
/// The first failure of one decode on a device context (load, buffers, copies,
/// plan, launch, synchronize, copy back), or MLA_SUCCESS; every buffer
/// and the kernel are released on every path, as a caller would.
struct DriverRun {
  mla_status status = MLA_SUCCESS;
  std::string step, message;

  bool failed(mla_status s, const char *what) {
    if (s != MLA_SUCCESS && status == MLA_SUCCESS) {
      status = s;
      step = what;
      message = mla_last_error();
    }
    return s != MLA_SUCCESS;
  }
};

DriverRun decodeOnDevice(mla_context context, const DecodeProblem &p,
                         const std::string &bytes) {
  DriverRun run;
  mla_kernel kernel = nullptr;
  if (run.failed(mla_kernel_load_memory(context, bytes.data(), bytes.size(),
                                        &kernel),
                 "load"))
    return run;
  mla_plan pl = plan(kernel, p);
  Launchable host(pl, p);
  std::vector<void *> buffers;
  auto device = [&](const void *data, size_t size) -> void * {
    void *ptr = nullptr;
    if (run.failed(mla_malloc(context, size, &ptr), "malloc"))
      return nullptr;
    buffers.push_back(ptr);
    if (data)
      run.failed(mla_copy_to_device(context, ptr, data, size), "copy in");
    return ptr;
  };
  mla_decode_args args = host.args;
  args.q = device(p.q.data(), p.q.size() * 2);
  args.kv = device(p.kv.data(), p.kv.size());
  args.kv_scale = device(&p.fp8Scale, 4);
  args.qo_indptr = static_cast<const int32_t *>(
      device(p.qoIndptr.data(), p.qoIndptr.size() * 4));
  args.kv_indptr = static_cast<const int32_t *>(
      device(p.kvIndptr.data(), p.kvIndptr.size() * 4));
  args.work_list = device(host.workList.data(), host.workList.size() * 4);
  args.out = device(nullptr, host.out.size() * 2);
  args.lse = static_cast<float *>(device(nullptr, host.lse.size() * 4));
  args.workspace = device(nullptr, host.workspace.size());
  if (run.status == MLA_SUCCESS &&
      !run.failed(mla_launch(kernel, pl, &args, nullptr), "launch") &&
      !run.failed(mla_synchronize(context, nullptr), "synchronize"))
    run.failed(mla_copy_to_host(context, host.out.data(), args.out,
                                host.out.size() * 2),
               "copy out");
  for (void *ptr : buffers)
    if (run.failed(mla_free(context, ptr), "free"))
      mla_free(context, ptr); // a free that failed is retried
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
  return run;
}
} // namespace

/// Each driver call the hip backend makes fails once, in turn: the failure
/// surfaces as its documented status with the call's name, nothing stays
/// allocated or loaded, and the same context then runs the decode.
TEST_F(FakeHip, EveryDriverFailureIsReportedAndRecovered) {
  void *fake = dlopen(MLA_FAKE_HIP_PATH, RTLD_NOW);
  ASSERT_NE(fake, nullptr);
  auto failNext = reinterpret_cast<void (*)(const char *, int)>(
      dlsym(fake, "fakeHipFailNext"));
  auto liveAllocations =
      reinterpret_cast<int (*)()>(dlsym(fake, "fakeHipLiveAllocations"));
  auto liveModules =
      reinterpret_cast<int (*)()>(dlsym(fake, "fakeHipLiveModules"));
  ASSERT_TRUE(failNext && liveAllocations && liveModules);

  ContextGuard g;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_HIP, 0, &g.context), MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem({70, 300}, 2);
  int allocations = liveAllocations(), modules = liveModules();
  struct Case {
    const char *function, *step;
    mla_status status;
  };
  const Case cases[] = {
      {"hipModuleLoadData", "load", MLA_ERROR_INVALID_ARTIFACT},
      {"hipModuleGetFunction", "load", MLA_ERROR_INVALID_ARTIFACT},
      {"hipMalloc", "malloc", MLA_ERROR_INTERNAL},
      {"hipMemcpy", "copy in", MLA_ERROR_INTERNAL},
      {"hipModuleLaunchKernel", "launch", MLA_ERROR_LAUNCH_FAILED},
      {"hipStreamSynchronize", "synchronize", MLA_ERROR_LAUNCH_FAILED},
      {"hipFree", "free", MLA_ERROR_INTERNAL},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.function);
    failNext(c.function, 999);
    DriverRun failing = decodeOnDevice(g.context, p, fp8Artifact());
    EXPECT_EQ(failing.status, c.status) << failing.message;
    EXPECT_EQ(failing.step, c.step);
    EXPECT_NE(failing.message.find("fake HIP error (999)"), std::string::npos)
        << failing.message;
    EXPECT_EQ(liveAllocations(), allocations);
    EXPECT_EQ(liveModules(), modules);
    // The context is still good.
    DriverRun again = decodeOnDevice(g.context, p, fp8Artifact());
    EXPECT_EQ(again.status, MLA_SUCCESS) << again.step << ": " << again.message;
  }
}

//===----------------------------------------------------------------------===//
// The cuda backend, without a GPU (a stand-in libcuda.so.1)
//===----------------------------------------------------------------------===//

namespace {
struct FakeCuda : ::testing::Test {
  void SetUp() override {
    ::setenv("MLA_CUDA_LIBRARY", MLA_FAKE_CUDA_PATH, 1);
    ::unsetenv("FAKE_CUDA_DEVICE_COUNT");
    ::unsetenv("FAKE_CUDA_CC");
    fake = dlopen(MLA_FAKE_CUDA_PATH, RTLD_NOW);
    ASSERT_NE(fake, nullptr);
  }
  void TearDown() override { ::unsetenv("MLA_CUDA_LIBRARY"); }
  template <typename F> F hook(const char *name) {
    auto fn = reinterpret_cast<F>(dlsym(fake, name));
    EXPECT_NE(fn, nullptr) << name;
    return fn;
  }
  /// A launch the stand-in recorded: its kernel and grid.
  struct RecordedLaunch {
    std::string name;
    std::array<unsigned, 3> grid;
  };
  /// The launches one mla_launch of a host plan for sequences of `lens`
  /// (one query token each) makes.
  std::vector<RecordedLaunch> hostPlanLaunches(mla_kernel kernel,
                                               std::vector<int64_t> lens) {
    auto count = hook<int (*)()>("fakeCudaLaunchCount");
    auto get =
        hook<const char *(*)(int, unsigned *, unsigned *, const uint8_t **,
                             size_t *)>("fakeCudaLaunch");
    DecodeProblem p = smallProblem(lens, 1);
    mla_plan pl = plan(kernel, p);
    Launchable l(pl, p);
    int before = count();
    EXPECT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
        << mla_last_error();
    std::vector<RecordedLaunch> launches;
    for (int i = before; i < count(); ++i) {
      RecordedLaunch r;
      unsigned block[3];
      const uint8_t *params;
      size_t bytes;
      r.name = get(i, r.grid.data(), block, &params, &bytes);
      launches.push_back(r);
    }
    mla_plan_destroy(pl);
    return launches;
  }
  void *fake = nullptr;
};
} // namespace

TEST(Runtime, NoCudaDriver) {
  ::setenv("MLA_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  mla_context context = nullptr;
  EXPECT_EQ(mla_context_create(MLA_BACKEND_CUDA, 0, &context),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_EQ(context, nullptr);
  EXPECT_NE(std::string(mla_last_error()).find("cannot load the CUDA driver"),
            std::string::npos)
      << mla_last_error();
  ::unsetenv("MLA_CUDA_LIBRARY");
}

TEST_F(FakeCuda, NoDevice) {
  ::setenv("FAKE_CUDA_DEVICE_COUNT", "0", 1);
  mla_context context = nullptr;
  EXPECT_EQ(mla_context_create(MLA_BACKEND_CUDA, 0, &context),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(mla_last_error()).find("no NVIDIA GPU"),
            std::string::npos)
      << mla_last_error();
  ::setenv("FAKE_CUDA_DEVICE_COUNT", "1", 1);
  EXPECT_EQ(mla_context_create(MLA_BACKEND_CUDA, 2, &context),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(mla_last_error()).find("no GPU 2"), std::string::npos)
      << mla_last_error();
}

/// An Ampere card is sm_80; a gfx950 artifact has no PTX.
TEST_F(FakeCuda, WrongDeviceOrArtifact) {
  ::setenv("FAKE_CUDA_CC", "8.0", 1);
  {
    ContextGuard g;
    mla_kernel kernel = nullptr;
    EXPECT_EQ(load(MLA_BACKEND_CUDA, fp8SM90aArtifact(), &g.context, &kernel),
              MLA_ERROR_TARGET_MISMATCH);
    EXPECT_STREQ(mla_last_error(), "the artifact is built for sm_90a, but GPU "
                                   "0 is sm_80; recompile it for sm_80");
  }
  ::unsetenv("FAKE_CUDA_CC");
  ContextGuard g;
  mla_kernel kernel = nullptr;
  EXPECT_EQ(load(MLA_BACKEND_CUDA, fp8Artifact(), &g.context, &kernel),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(mla_last_error()).find("has no PTX (built for gfx950)"),
            std::string::npos)
      << mla_last_error();
}

/// PTX the driver's JIT refuses is an invalid artifact with the JIT's log.
TEST_F(FakeCuda, PtxJitFailureCarriesTheLog) {
  auto artifact = parseArtifact(fp8SM90aArtifact());
  ASSERT_TRUE(bool(artifact));
  size_t at = artifact->ptx.find(".target sm_90a");
  ASSERT_NE(at, std::string::npos);
  artifact->ptx.replace(at, 14, ".target sm_52 ");
  ContextGuard g;
  mla_kernel kernel = nullptr;
  EXPECT_EQ(load(MLA_BACKEND_CUDA, serializeArtifact(*artifact), &g.context,
                 &kernel),
            MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error())
                .find("cuModuleLoadDataEx) failed: fake CUDA error (218): "
                      "ptxas fatal: not PTX for sm_90a"),
            std::string::npos)
      << mla_last_error();
}

/// The parameter buffer holds every memref descriptor word at 8 bytes a
/// word, in order, as the PTX declares them; the plan kernel runs only for
/// device plans, the partial kernel on the persistent grid (2 blocks per
/// SM), the combine kernel one block per sequence.
TEST_F(FakeCuda, PacksKernelParametersInOrder) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_CUDA, fp8SM90aArtifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  const char *arch = nullptr;
  ASSERT_EQ(mla_context_arch(g.context, &arch), MLA_SUCCESS);
  EXPECT_STREQ(arch, "sm_90a");
  DecodeProblem p = smallProblem({70, 300}, 3);
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);
  auto count = hook<int (*)()>("fakeCudaLaunchCount");
  auto get = hook<const char *(*)(int, unsigned *, unsigned *,
                                  const uint8_t **, size_t *)>(
      "fakeCudaLaunch");
  int before = count();
  ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
      << mla_last_error();
  ASSERT_EQ(count(), before + 2);
  auto artifact = parseArtifact(fp8SM90aArtifact());
  ASSERT_TRUE(bool(artifact));
  for (int k = 0; k < 2; ++k) {
    unsigned grid[3], block[3];
    const uint8_t *params;
    size_t bytes;
    std::string name = get(before + k, grid, block, &params, &bytes);
    const ArtifactKernel &desc = artifact->kernels[k];
    EXPECT_EQ(name, desc.name);
    EXPECT_EQ(block[0], 256u);
    EXPECT_EQ(grid[0], k == 0 ? 264u : 2u);
    EXPECT_EQ(grid[1], k == 0 ? 1u : 16u); // combine: a block per head
    int64_t word = 0;
    for (const ArtifactKernelArg &arg : desc.args)
      for (auto [offset, size] : arg.fields) {
        EXPECT_EQ(offset, 8 * word++) << arg.name;
        EXPECT_EQ(size, 8) << arg.name;
      }
    EXPECT_EQ(bytes, size_t(8 * word));
    // The kernel's dynamic shared memory at every launch; the partial
    // kernel's is over the driver's default 48 KiB (allowed at load).
    EXPECT_EQ(hook<unsigned (*)(int)>("fakeCudaLaunchSharedBytes")(before + k),
              unsigned(desc.dynamicLdsBytes));
    if (k == 0) {
      EXPECT_GT(desc.dynamicLdsBytes, 48 * 1024);
    }
    // Both wait for the stream's previous kernel themselves
    // (griddepcontrol.wait) and are launched to start while it finishes:
    // the partial kernel after whatever came before, the combine after the
    // partial kernel.
    EXPECT_TRUE(desc.waitsForPrevious);
    EXPECT_EQ(hook<int (*)(int)>("fakeCudaLaunchProgrammatic")(before + k), 1);
    // The first parameter: q's (partial) or partial_out's (combine) pointer.
    int64_t first = 0;
    std::memcpy(&first, params, 8);
    EXPECT_EQ(first, reinterpret_cast<int64_t>(k == 0 ? l.args.q
                                                      : l.args.workspace));
  }
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
  EXPECT_EQ(hook<int (*)()>("fakeCudaLiveModules")(), 0);
}

/// A host plan whose sequences have one item each launches the partial
/// kernel alone: it writes every output, the combine would merge nothing.
TEST_F(FakeCuda, NoCombineWithoutItemsToMerge) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_CUDA, fp8SM90aArtifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  auto merged = hostPlanLaunches(kernel, {70, 300});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].name, kernel::kPartial);
  EXPECT_EQ(merged[1].name, kernel::kCombine);
  auto alone = hostPlanLaunches(kernel, {70, 100});
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].name, kernel::kPartial);
  mla_kernel_destroy(kernel);
}

/// The combine's grid cuts the columns into slices (its z) where few
/// sequences have many items (mla::combineSlices).
TEST_F(FakeCuda, CombineSlicesFollowTheHostPlan) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_CUDA, fp8SM90aArtifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  for (auto [lens, slices] : {std::pair{std::vector<int64_t>{4096, 4096}, 4u},
                              std::pair{std::vector<int64_t>{70, 300}, 1u}}) {
    auto launches = hostPlanLaunches(kernel, lens);
    ASSERT_EQ(launches.size(), 2u) << lens[0];
    EXPECT_EQ(launches[1].name, kernel::kCombine);
    EXPECT_EQ(launches[1].grid[0], 2u);
    EXPECT_EQ(launches[1].grid[1], 16u);
    EXPECT_EQ(launches[1].grid[2], slices) << lens[0];
  }
  mla_kernel_destroy(kernel);
}

/// Q, the cache, out or the workspace off a 16-byte boundary: refused
/// before any launch.
TEST_F(FakeCuda, MisalignedBuffersAreRefused) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_CUDA, fp8SM90aArtifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem({70, 300}, 3);
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);
  auto count = hook<int (*)()>("fakeCudaLaunchCount");
  int before = count();
  for (std::string which : {"q", "kv", "out", "workspace"}) {
    mla_decode_args shifted = l.args;
    if (which == "q")
      shifted.q = static_cast<const char *>(l.args.q) + 2;
    else if (which == "kv")
      shifted.kv = static_cast<const char *>(l.args.kv) + 2;
    else if (which == "out")
      shifted.out = static_cast<char *>(l.args.out) + 8;
    else
      shifted.workspace = static_cast<char *>(l.args.workspace) + 8;
    EXPECT_EQ(mla_launch(kernel, pl, &shifted, nullptr),
              MLA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mla_last_error())
                  .find("args->" + which + " is not 16-byte aligned"),
              std::string::npos)
        << mla_last_error();
  }
  EXPECT_EQ(count(), before);
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
}

/// Each driver call fails once, in turn: its documented status with the
/// call's name; nothing stays allocated or loaded; the context recovers.
TEST_F(FakeCuda, EveryDriverFailureIsReportedAndRecovered) {
  auto failNext = hook<void (*)(const char *, int)>("fakeCudaFailNext");
  auto liveAllocations = hook<int (*)()>("fakeCudaLiveAllocations");
  auto liveModules = hook<int (*)()>("fakeCudaLiveModules");
  auto retained = hook<int (*)()>("fakeCudaRetainedContexts");
  int contexts = retained();
  {
    ContextGuard g;
    ASSERT_EQ(mla_context_create(MLA_BACKEND_CUDA, 0, &g.context), MLA_SUCCESS)
        << mla_last_error();
    DecodeProblem p = smallProblem({70, 300}, 2);
    int allocations = liveAllocations(), modules = liveModules();
    struct Case {
      const char *function, *step;
      mla_status status;
    };
    const Case cases[] = {
        {"cuModuleLoadDataEx", "load", MLA_ERROR_INVALID_ARTIFACT},
        {"cuModuleGetFunction", "load", MLA_ERROR_INVALID_ARTIFACT},
        {"cuFuncSetAttribute", "load", MLA_ERROR_INVALID_ARTIFACT},
        {"cuMemAlloc_v2", "malloc", MLA_ERROR_INTERNAL},
        {"cuMemcpyHtoD_v2", "copy in", MLA_ERROR_INTERNAL},
        // Both kernels of a host-planned launch go through cuLaunchKernelEx
        // (programmatic launches); cuLaunchKernel is the plan kernel's.
        {"cuLaunchKernelEx", "launch", MLA_ERROR_LAUNCH_FAILED},
        {"cuStreamSynchronize", "synchronize", MLA_ERROR_LAUNCH_FAILED},
        {"cuMemcpyDtoH_v2", "copy out", MLA_ERROR_INTERNAL},
        {"cuMemFree_v2", "free", MLA_ERROR_INTERNAL},
        {"cuCtxSetCurrent", "load", MLA_ERROR_INTERNAL},
    };
    for (const Case &c : cases) {
      SCOPED_TRACE(c.function);
      failNext(c.function, 999);
      DriverRun failing = decodeOnDevice(g.context, p, fp8SM90aArtifact());
      EXPECT_EQ(failing.status, c.status) << failing.message;
      EXPECT_EQ(failing.step, c.step);
      EXPECT_NE(failing.message.find("fake CUDA error (999)"),
                std::string::npos)
          << failing.message;
      EXPECT_EQ(liveAllocations(), allocations);
      EXPECT_EQ(liveModules(), modules);
      DriverRun again = decodeOnDevice(g.context, p, fp8SM90aArtifact());
      EXPECT_EQ(again.status, MLA_SUCCESS) << again.step << ": "
                                           << again.message;
    }
  }
  // Destroying the context releases the primary context it retained.
  EXPECT_EQ(retained(), contexts);
}

/// The emu runs the sm_90a kernels too (generic GPU ops), so their numbers
/// are checked without a GPU.
TEST(Runtime, EmuRunsTheSM90aKernels) {
  ContextGuard g;
  mla_kernel kernel = nullptr;
  ASSERT_EQ(load(MLA_BACKEND_EMU, fp8SM90aArtifact(), &g.context, &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  DecodeProblem p = smallProblem({70, 300}, 3);
  mla_plan pl = plan(kernel, p);
  Launchable l(pl, p);
  ASSERT_EQ(mla_launch(kernel, pl, &l.args, nullptr), MLA_SUCCESS)
      << mla_last_error();
  Tolerance tol = defaultTolerance(CacheFormat::FP8);
  ErrorReport report =
      compareWithReference(referenceDecode(l.problem), l.out, l.lse, tol);
  EXPECT_TRUE(report.passed(tol)) << "rel_err " << report.relErr;
  mla_plan_destroy(pl);
  mla_kernel_destroy(kernel);
}

//===----------------------------------------------------------------------===//
// Manifests that lie under valid CRCs
//===----------------------------------------------------------------------===//

namespace {
/// A ustar archive of `members`, with valid header checksums.
std::string tarArchive(
    const std::vector<std::pair<std::string, std::string>> &members) {
  std::string archive;
  for (const auto &[name, data] : members) {
    char h[512] = {};
    std::snprintf(h, 100, "%s", name.c_str());
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", (unsigned long long)data.size());
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    std::snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    archive.append(h, 512);
    archive += data;
    archive.append((512 - data.size() % 512) % 512, '\0');
  }
  return archive + std::string(1024, '\0');
}

/// The members of an archive serializeArtifact wrote (its layout is known).
std::vector<std::pair<std::string, std::string>>
tarMembers(const std::string &archive) {
  std::vector<std::pair<std::string, std::string>> members;
  size_t pos = 0;
  while (pos + 512 <= archive.size() && archive[pos] != '\0') {
    std::string name(archive.c_str() + pos);
    size_t size = std::stoull(archive.substr(pos + 124, 11), nullptr, 8);
    members.push_back({name, archive.substr(pos + 512, size)});
    pos += 512 + (size + 511) / 512 * 512;
  }
  return members;
}

mla_status loadBytes(const std::string &bytes) {
  ContextGuard g;
  EXPECT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, &g.context), MLA_SUCCESS);
  mla_kernel kernel = nullptr;
  mla_status status =
      mla_kernel_load_memory(g.context, bytes.data(), bytes.size(), &kernel);
  if (kernel)
    mla_kernel_destroy(kernel);
  return status;
}
} // namespace

/// An artifact whose CRCs are all valid but whose manifest describes
/// something a backend must not launch is refused at load, with the field.
TEST(Runtime, LyingManifestsAreRejectedAtLoad) {
  auto original = parseArtifact(fp8Artifact());
  ASSERT_TRUE(bool(original)) << original.takeError().message();
  struct Lie {
    const char *what;
    std::function<void(Artifact &)> apply;
    const char *message;
  };
  const Lie lies[] = {
      {"kernarg offset past the segment",
       [](Artifact &a) {
         a.kernels[0].args[1].fields[3].first = a.kernels[0].kernargBytes;
       },
       "lies outside the 728-byte kernarg segment"},
      {"too few kernarg fields",
       [](Artifact &a) { a.kernels[0].args[0].fields.pop_back(); },
       "kernarg fields for 9 descriptor words"},
      {"unknown kernel", [](Artifact &a) { a.kernels[1].name = "evil"; },
       "expected kernel mla_combine"},
      {"a fourth kernel",
       [](Artifact &a) { a.kernels.push_back(a.kernels[1]); },
       "expected kernel none"},
      {"no plan kernel", [](Artifact &a) { a.kernels.pop_back(); },
       "describes the partial, the combine and the plan kernel"},
      {"a partial kernel on a grid that depends on the batch",
       [](Artifact &a) { a.kernels[0].grid[0] = "num_work_items"; },
       "not a fixed workgroup count"},
      {"no XCDs", [](Artifact &a) { a.xcds = 0; }, "sizes are out of range"},
      {"unknown argument",
       [](Artifact &a) { a.kernels[0].args[0].name = "host_pointer"; },
       "unknown kernel argument 'host_pointer'"},
      {"negative dimension",
       [](Artifact &a) { a.kernels[0].args[0].dims[1] = "-16"; },
       "size '-16': size out of range"},
      {"huge dimension",
       [](Artifact &a) { a.kernels[0].args[0].dims[2] = "99999999999"; },
       "size out of range"},
      {"unknown size symbol",
       [](Artifact &a) { a.kernels[0].grid[0] = "num_bytes"; },
       "unknown size symbol 'num_bytes'"},
      {"zero block", [](Artifact &a) { a.kernels[0].block[1] = 0; },
       "block size out of range"},
      {"oversized workgroup",
       [](Artifact &a) { a.kernels[0].block = {1024, 2, 1}; },
       "launch sizes out of range"},
      {"huge head count", [](Artifact &a) { a.numHeads = int64_t(1) << 40; },
       "sizes are out of range"},
      {"huge kernarg segment",
       [](Artifact &a) { a.kernels[1].kernargBytes = int64_t(1) << 33; },
       "launch sizes out of range"},
      {"page size not a power of two", [](Artifact &a) { a.pageSize = 48; },
       "sizes are out of range"},
      {"page size past 256", [](Artifact &a) { a.pageSize = 512; },
       "sizes are out of range"},
      {"a config without the kernels' tile",
       [](Artifact &a) { a.config = "#mla.config<heads_per_workgroup = 16>"; },
       "names no kv_tile that is a power of two"},
      {"a tile not a power of two",
       [](Artifact &a) {
         a.config.replace(a.config.find("kv_tile = 64"), 12, "kv_tile = 96");
       },
       "names no kv_tile that is a power of two"},
      {"paged, but the kernel reads a contiguous cache",
       [](Artifact &a) { a.pageSize = 64; },
       "decode.page_size 64 but the kernel takes no page table"},
  };
  for (const Lie &lie : lies) {
    SCOPED_TRACE(lie.what);
    Artifact a = *original;
    lie.apply(a);
    EXPECT_EQ(loadBytes(serializeArtifact(a)), MLA_ERROR_INVALID_ARTIFACT);
    EXPECT_NE(std::string(mla_last_error()).find(lie.message),
              std::string::npos)
        << mla_last_error();
  }

  // Lies about the members, told in the manifest's text.
  auto members = tarMembers(fp8Artifact());
  ASSERT_EQ(members.size(), 4u);
  std::string manifest = members[0].second;
  size_t files = manifest.find("\"files\": [");
  size_t open = manifest.find('{', files), close = manifest.find('}', open);
  std::string entry = manifest.substr(open, close - open + 1);
  auto withManifest = [&](const std::string &text, bool dropLast = false) {
    auto copy = members;
    copy[0].second = text;
    if (dropLast)
      copy.pop_back();
    return tarArchive(copy);
  };
  // The archive reads back as it was written (the helpers are right).
  EXPECT_EQ(loadBytes(withManifest(manifest)), MLA_SUCCESS) << mla_last_error();

  std::string listedTwice = manifest;
  listedTwice.insert(open, entry + ",");
  EXPECT_EQ(loadBytes(withManifest(listedTwice)), MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("is listed twice"),
            std::string::npos)
      << mla_last_error();

  std::string size = "\"bytes\": ";
  size_t at = manifest.find(size, open) + size.size();
  std::string biggerMember = manifest;
  biggerMember.insert(at, "1");
  EXPECT_EQ(loadBytes(withManifest(biggerMember)), MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("the manifest says"),
            std::string::npos)
      << mla_last_error();

  std::string unlisted = manifest;
  unlisted.erase(open, close - open + 2); // the entry and its comma
  EXPECT_EQ(loadBytes(withManifest(unlisted)), MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error())
                .find("holds members the manifest does not list"),
            std::string::npos)
      << mla_last_error();

  EXPECT_EQ(loadBytes(withManifest(manifest, /*dropLast=*/true)),
            MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("is missing"), std::string::npos)
      << mla_last_error();

  std::string duplicateKey = manifest;
  duplicateKey.insert(1, "\"version\": 1,");
  EXPECT_EQ(loadBytes(withManifest(duplicateKey)), MLA_ERROR_INVALID_ARTIFACT);
  EXPECT_NE(std::string(mla_last_error()).find("duplicate key 'version'"),
            std::string::npos)
      << mla_last_error();
}
