//===- DevicePlanTest.cpp - device plans: planner, balance, bounds, replay ===//
//
// The plan kernel (run on emu) must write exactly the work list and
// schedule the host planner computes, balance skewed batches, refuse
// batches beyond its maxima without touching memory outside them, and a
// replay must launch the same kernels, grids and argument bytes at every
// step (the stand-in HIP library records them).
//
//===----------------------------------------------------------------------===//

#include "mla/runtime.h"

#include "mla/Compiler/ArtifactCompiler.h"
#include "mla/Runtime/Artifact.h"
#include "mla/Runtime/SplitPlanner.h"
#include "mla/Tools/Problem.h"

#include "gtest/gtest.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

using namespace mla;

namespace {

/// A batch padded to the plan's maxima: sequences past the batch have no
/// tokens and no cache.
struct Batch {
  std::vector<int32_t> qo, kv, last; // [S+1], [S+1], [S] (paged)
};

Batch makeBatch(const std::vector<int64_t> &qLens,
                const std::vector<int64_t> &lens, int64_t maxSeqs,
                int64_t pageSize) {
  Batch b;
  b.qo = {0};
  b.kv = {0};
  for (size_t s = 0; s < lens.size(); ++s) {
    b.qo.push_back(b.qo.back() + qLens[s]);
    int64_t count = pageSize > 0 ? (lens[s] + pageSize - 1) / pageSize : lens[s];
    b.kv.push_back(b.kv.back() + count);
    if (pageSize > 0)
      b.last.push_back(lens[s] == 0 ? 0 : lens[s] - (count - 1) * pageSize);
  }
  b.qo.resize(maxSeqs + 1, b.qo.back());
  b.kv.resize(maxSeqs + 1, b.kv.back());
  b.last.resize(maxSeqs, 0);
  return b;
}

/// One emu context with a device plan of the given maxima.
class DevicePlanner {
public:
  DevicePlanner(KernelSignature sig, int32_t maxSeqs, int32_t maxTokens,
                int32_t maxKV)
      : maxSeqs(maxSeqs), maxTokens(maxTokens), maxKV(maxKV),
        pageSize(sig.pageSize) {
    ArtifactForms forms;
    forms.emu = true;
    auto compiled = compileArtifact(sig, forms);
    if (!compiled) {
      ADD_FAILURE() << llvm::toString(compiled.takeError());
      return;
    }
    artifact = std::move(*compiled);
    std::string bytes = serializeArtifact(artifact);
    EXPECT_EQ(mla_context_create(MLA_BACKEND_EMU, 0, &context), MLA_SUCCESS)
        << mla_last_error();
    EXPECT_EQ(mla_kernel_load_memory(context, bytes.data(), bytes.size(),
                                     &kernel),
              MLA_SUCCESS)
        << mla_last_error();
    EXPECT_EQ(mla_plan_create_device(kernel, maxSeqs, maxTokens, maxKV, &plan),
              MLA_SUCCESS)
        << mla_last_error();
    mla_plan_get_info(plan, &info);
    EXPECT_TRUE(info.device_plan);
    workList.assign(info.work_list_bytes / 4, -1);
  }
  ~DevicePlanner() {
    if (plan)
      mla_plan_destroy(plan);
    if (kernel)
      mla_kernel_destroy(kernel);
    if (context)
      mla_context_destroy(context);
  }

  /// The arguments of a launch on `batch`, q, out and lse of maxTokens
  /// rows, the cache of `cacheRows` rows (buffers of the test; the plan
  /// kernel alone reads only the sizes, so it gets no cache memory).
  mla_decode_args args(Batch &batch, int64_t cacheRows,
                       bool allocateCache = true) {
    q.assign(maxTokens * artifact.numHeads * artifact.qkDim, 0);
    kv.assign(allocateCache ? std::max<int64_t>(1, cacheRows) * artifact.qkDim
                            : 1,
              0);
    table.assign(std::max(1, maxKV), 0);
    out.assign(maxTokens * artifact.numHeads * artifact.vDim, 0x7FC1);
    lse.assign(maxTokens * artifact.numHeads, 1234.0f);
    workspace.assign(info.workspace_bytes, 0);
    mla_decode_args a{};
    a.q = q.data();
    a.kv = kv.data();
    a.kv_scale = &scale;
    a.qo_indptr = batch.qo.data();
    a.kv_indptr = batch.kv.data();
    a.kv_indices = pageSize > 0 ? table.data() : nullptr;
    a.kv_last_page_len = pageSize > 0 ? batch.last.data() : nullptr;
    a.work_list = workList.data();
    a.out = out.data();
    a.lse = lse.data();
    a.workspace = workspace.data();
    a.workspace_bytes = workspace.size();
    a.num_seqs = maxSeqs;
    a.num_tokens = maxTokens;
    a.num_kv_rows = static_cast<int32_t>(cacheRows);
    return a;
  }

  /// Runs the plan kernel on `batch`; its status word.
  int32_t planOnDevice(Batch &batch, int64_t cacheRows) {
    mla_decode_args a = args(batch, cacheRows, /*allocateCache=*/false);
    EXPECT_EQ(mla_launch_plan_kernel(kernel, plan, &a, nullptr), MLA_SUCCESS)
        << mla_last_error();
    return workList[info.status_offset / 4];
  }

  /// The device's work list, read back as the host planner's form.
  WorkList deviceList() const {
    WorkList list;
    const int32_t *w = workList.data();
    int64_t units = 0;
    int64_t items = w[4 * info.num_work_items + maxSeqs];
    for (int64_t i = 0; i < items; ++i)
      list.items.push_back({w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]});
    const int32_t *indptr = w + 4 * info.num_work_items;
    list.seqItemIndptr.assign(indptr, indptr + maxSeqs + 1);
    const int32_t *u = indptr + maxSeqs + 1;
    int64_t workgroups = *persistentWorkgroups(artifact);
    const int32_t *wg = u + 3 * unitsCapacity();
    list.workgroupUnitIndptr.assign(wg, wg + workgroups + 1);
    units = list.workgroupUnitIndptr.back();
    for (int64_t i = 0; i < units; ++i)
      list.units.push_back({u[3 * i], u[3 * i + 1], u[3 * i + 2]});
    return list;
  }

  /// The host planner on the same batch, with the runtime's options.
  WorkList hostList(const Batch &batch) const {
    SplitOptions options;
    options.forcedSplits = artifact.forcedSplits;
    options.kvTile = itemTile(*kernelKVTile(artifact));
    options.workgroups = *persistentWorkgroups(artifact);
    options.xcds = artifact.xcds;
    std::vector<int64_t> lens;
    const ArtifactKernel &partial = artifact.kernels[0];
    for (int64_t s = 0; s < maxSeqs; ++s) {
      int64_t qLen = batch.qo[s + 1] - batch.qo[s];
      int64_t count = batch.kv[s + 1] - batch.kv[s];
      lens.push_back(pageSize > 0 && count > 0
                         ? (count - 1) * pageSize + batch.last[s]
                         : count);
      int64_t rows = partial.rowsPerWorkgroup, heads = partial.headsPerBlock;
      options.workgroupsPerItem.push_back(artifact.numHeads / heads *
                                          ((qLen * heads + rows - 1) / rows));
    }
    auto list = planSplits(artifact.computeUnits, lens, options);
    EXPECT_TRUE(bool(list));
    return std::move(*list);
  }


  Artifact artifact;
  mla_context context = nullptr;
  mla_kernel kernel = nullptr;
  mla_plan plan = nullptr;
  mla_plan_info info{};
  int32_t maxSeqs, maxTokens, maxKV;
  int64_t pageSize;
  std::vector<int32_t> workList, table;
  std::vector<uint16_t> q, out;
  std::vector<uint8_t> kv, workspace;
  std::vector<float> lse;
  float scale = 1.0f;

  /// The units the work list holds room for: the words between
  /// item_indptr and the workgroup indptr.
  int64_t unitsCapacity() const {
    int64_t workgroups = *persistentWorkgroups(artifact);
    int64_t words = info.status_offset / 4 - (4 * info.num_work_items) -
                    (maxSeqs + 1) - (workgroups + 1);
    return words / 3;
  }
};

void expectSameLists(const WorkList &device, const WorkList &host) {
  ASSERT_EQ(device.seqItemIndptr, host.seqItemIndptr);
  ASSERT_EQ(device.items.size(), host.items.size());
  for (size_t i = 0; i < host.items.size(); ++i) {
    const WorkItem &d = device.items[i], &h = host.items[i];
    ASSERT_TRUE(d.seq == h.seq && d.kvBegin == h.kvBegin && d.kvEnd == h.kvEnd &&
                d.partialSlot == h.partialSlot)
        << "item " << i << ": device (" << d.seq << ", " << d.kvBegin << ", "
        << d.kvEnd << ", " << d.partialSlot << ") host (" << h.seq << ", "
        << h.kvBegin << ", " << h.kvEnd << ", " << h.partialSlot << ")";
  }
  ASSERT_EQ(device.units.size(), host.units.size());
  for (size_t u = 0; u < host.units.size(); ++u) {
    const WorkUnit &d = device.units[u], &h = host.units[u];
    ASSERT_TRUE(d.item == h.item && d.rowBlock == h.rowBlock &&
                d.workgroup == h.workgroup)
        << "unit " << u << ": device (" << d.item << ", " << d.rowBlock << ", "
        << d.workgroup << ") host (" << h.item << ", " << h.rowBlock << ", "
        << h.workgroup << ")";
  }
  ASSERT_EQ(device.workgroupUnitIndptr, host.workgroupUnitIndptr);
}

KernelSignature fp8(int64_t heads, int64_t pageSize = 0) {
  KernelSignature sig{CacheFormat::FP8, heads, 576, 512};
  sig.pageSize = pageSize;
  return sig;
}

/// Random batches within the maxima: lengths from 0, the tile edges and
/// the range, q_len 1..4, fewer sequences than the maxima.
void checkRandomBatches(DevicePlanner &p, int64_t maxLen, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 12; ++trial) {
    int64_t seqs = trial == 0 ? p.maxSeqs : 1 + rng() % p.maxSeqs;
    std::vector<int64_t> qLens, lens;
    const int64_t edges[] = {0, 1, 63, 64, 65, 128, 8192, maxLen};
    for (int64_t s = 0; s < seqs; ++s) {
      qLens.push_back(1 + rng() % 4);
      int64_t len = rng() % 3 == 0 ? edges[rng() % std::size(edges)]
                                   : int64_t(rng() % (maxLen + 1));
      lens.push_back(std::min(len, maxLen));
    }
    Batch batch = makeBatch(qLens, lens, p.maxSeqs, p.pageSize);
    int64_t rows = p.pageSize > 0 ? p.pageSize : p.maxKV;
    SCOPED_TRACE("trial " + std::to_string(trial) + ", " +
                 std::to_string(seqs) + " sequences");
    ASSERT_EQ(p.planOnDevice(batch, rows), 0);
    expectSameLists(p.deviceList(), p.hostList(batch));
  }
}

TEST(DevicePlan, MatchesTheHostPlannerH16) {
  // More sequences than the kernel's 256 threads: several per thread.
  DevicePlanner p(fp8(16), 300, 1200, 300 * 20000);
  checkRandomBatches(p, 20000, 1);
}

TEST(DevicePlan, MatchesTheHostPlannerH128) {
  // Up to 8 row blocks per item (q_len 4, 64 rows per workgroup).
  DevicePlanner p(fp8(128), 40, 160, 40 * 9000);
  checkRandomBatches(p, 9000, 2);
}

TEST(DevicePlan, MatchesTheHostPlannerPaged) {
  DevicePlanner p(fp8(16, 16), 64, 256, 64 * 1000);
  checkRandomBatches(p, 16000, 3);
}

TEST(DevicePlan, MatchesTheHostPlannerForcedSplits) {
  KernelSignature sig = fp8(32);
  sig.config.splits = 5;
  DevicePlanner p(sig, 20, 80, 20 * 3000);
  checkRandomBatches(p, 3000, 4);
}

/// The schedule's cost per logical workgroup (positions + the fixed cost
/// of each unit), as the planner counts it.
std::vector<int64_t> workPerWorkgroup(const WorkList &list, int64_t workgroups) {
  std::vector<int64_t> work(workgroups, 0);
  for (const WorkUnit &u : list.units) {
    const WorkItem &item = list.items[u.item];
    work[u.workgroup] += item.kvEnd - item.kvBegin + SplitOptions{}.unitOverhead;
  }
  return work;
}

/// The busiest CU when the same units run as one workgroup each, dealt in
/// order to the first free CU (how a grid of one workgroup per unit runs).
int64_t dynamicDispatchMakespan(const WorkList &list, int64_t cus) {
  std::vector<int64_t> busy(cus, 0);
  for (const WorkUnit &u : list.units) {
    const WorkItem &item = list.items[u.item];
    auto cu = std::min_element(busy.begin(), busy.end());
    *cu += item.kvEnd - item.kvBegin + SplitOptions{}.unitOverhead;
  }
  return *std::max_element(busy.begin(), busy.end());
}

/// Skewed batches: the device plan's busiest workgroup is within 10% of
/// the busiest CU of the same units dispatched dynamically (a grid of one
/// workgroup per unit), and of the ideal: no schedule of these units beats
/// the mean work, the largest unit, nor — with more units than workgroups,
/// so that one runs two — the two smallest units together.
void checkBalance(DevicePlanner &p, const std::vector<int64_t> &lens) {
  std::vector<int64_t> qLens(lens.size(), 1);
  Batch batch = makeBatch(qLens, lens, p.maxSeqs, 0);
  ASSERT_EQ(p.planOnDevice(batch, p.maxKV), 0);
  WorkList device = p.deviceList();
  expectSameLists(device, p.hostList(batch));
  int64_t workgroups = *persistentWorkgroups(p.artifact);
  std::vector<int64_t> work = workPerWorkgroup(device, workgroups);
  int64_t busiest = *std::max_element(work.begin(), work.end());
  int64_t total = 0;
  for (int64_t w : work)
    total += w;
  std::vector<int64_t> costs;
  for (const WorkUnit &u : device.units)
    costs.push_back(device.items[u.item].kvEnd - device.items[u.item].kvBegin +
                    SplitOptions{}.unitOverhead);
  std::sort(costs.begin(), costs.end());
  double ideal = std::max<double>(double(total) / workgroups, costs.back());
  if ((int64_t)costs.size() > workgroups)
    ideal = std::max<double>(ideal, costs[0] + costs[1]);
  int64_t dynamic = dynamicDispatchMakespan(device, workgroups);
  std::printf("%zu units: busiest workgroup %lld, dynamic dispatch %lld, "
              "ideal %.0f, mean %.0f\n",
              costs.size(), (long long)busiest, (long long)dynamic, ideal,
              double(total) / workgroups);
  EXPECT_LE(busiest, 1.1 * ideal) << "ideal " << ideal;
  EXPECT_LE(busiest, 1.1 * dynamic) << "dynamic dispatch " << dynamic;
}

TEST(DevicePlan, MatchesTheHostPlannerOnOneTileItems) {
  // Batches of at most a tile a workgroup (SplitOptions::fineItemsFrom):
  // sequences cut 4 ways or more get one-tile items, the others not.
  DevicePlanner p(fp8(16), 4, 16, 4 * 1024);
  const std::vector<std::vector<int64_t>> batches = {
      {1024, 1024, 1024, 1024}, {512}, {256}, {1024, 256}, {1000, 3, 511}};
  for (const std::vector<int64_t> &lens : batches) {
    Batch batch = makeBatch(std::vector<int64_t>(lens.size(), 1), lens,
                            p.maxSeqs, p.pageSize);
    ASSERT_EQ(p.planOnDevice(batch, p.maxKV), 0);
    expectSameLists(p.deviceList(), p.hostList(batch));
  }
  // 1000 tokens: 15 items of 64 and one of 40.
  EXPECT_EQ(p.deviceList().numItemsOf(0), 16);
}

TEST(DevicePlan, BalancesOneLongAndThreeShort) {
  DevicePlanner p(fp8(16), 4, 4, 8192 + 48);
  checkBalance(p, {8192, 16, 16, 16});
}

TEST(DevicePlan, BalancesOneLongAnd255Short) {
  std::vector<int64_t> lens(256, 16);
  lens[0] = 8192;
  DevicePlanner p(fp8(16), 256, 256, 8192 + 255 * 16);
  checkBalance(p, lens);
  // The same with short sequences of 1024 positions: more work than CUs.
  std::fill(lens.begin() + 1, lens.end(), 1024);
  DevicePlanner q(fp8(16), 256, 256, 8192 + 255 * 1024);
  checkBalance(q, lens);
}

/// A batch beyond the maxima, or malformed, is refused in the status word:
/// the work list stays empty and the decode reads and writes nothing (the
/// emu fails a launch whose DMA leaves the cache).
TEST(DevicePlan, RefusesBatchesBeyondTheMaxima) {
  DevicePlanner p(fp8(16), 4, 8, 256);
  struct Case {
    const char *what;
    std::vector<int32_t> qo, kv;
    int32_t status;
  };
  const Case cases[] = {
      {"fits", {0, 2, 4, 4, 4}, {0, 100, 256, 256, 256}, 0},
      {"cache rows beyond the cache", {0, 2, 4, 4, 4}, {0, 100, 300, 300, 300},
       MLA_PLAN_TOO_MANY_KV},
      {"tokens beyond q", {0, 4, 8, 9, 9}, {0, 10, 20, 30, 30},
       MLA_PLAN_TOO_MANY_TOKENS},
      {"decreasing kv_indptr", {0, 1, 2, 3, 4}, {0, 50, 40, 60, 60},
       MLA_PLAN_BAD_INDPTR},
      {"q_len 5", {0, 5, 6, 6, 6}, {0, 10, 20, 20, 20}, MLA_PLAN_BAD_INDPTR},
      {"indptr not from 0", {1, 2, 3, 4, 5}, {0, 10, 20, 30, 40},
       MLA_PLAN_BAD_INDPTR},
      {"huge entries", {0, 1, 2, 3, 4}, {0, 10, 20, 30, 2000000000},
       MLA_PLAN_TOO_MANY_KV},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    Batch batch{c.qo, c.kv, {}};
    mla_decode_args a = p.args(batch, 256);
    ASSERT_EQ(mla_launch(p.kernel, p.plan, &a, nullptr), MLA_SUCCESS)
        << mla_last_error();
    int32_t status = p.workList[p.info.status_offset / 4];
    EXPECT_EQ(status, c.status);
    bool untouched = std::all_of(p.out.begin(), p.out.end(),
                                 [](uint16_t v) { return v == 0x7FC1; }) &&
                     std::all_of(p.lse.begin(), p.lse.end(),
                                 [](float v) { return v == 1234.0f; });
    EXPECT_EQ(untouched, status != 0);
    if (status != 0) {
      WorkList list = p.deviceList();
      EXPECT_TRUE(list.items.empty());
      EXPECT_TRUE(list.units.empty());
    }
  }
  // A paged plan: the page table holds 4 entries.
  DevicePlanner paged(fp8(16, 64), 2, 8, 4);
  Batch batch = makeBatch({1, 1}, {128, 300}, 2, 64);
  EXPECT_EQ(paged.planOnDevice(batch, 64 * 8), MLA_PLAN_TOO_MANY_KV);
  batch = makeBatch({1, 1}, {128, 100}, 2, 64);
  EXPECT_EQ(paged.planOnDevice(batch, 64 * 8), 0);
}

TEST(DevicePlan, ApiErrors) {
  DevicePlanner p(fp8(16), 4, 8, 256);
  std::vector<int32_t> host(p.info.work_list_bytes / 4);
  EXPECT_EQ(mla_plan_get_work_list(p.plan, host.data(), p.info.work_list_bytes),
            MLA_ERROR_INVALID_ARGUMENT);
  mla_plan other = nullptr;
  EXPECT_EQ(mla_plan_create_device(p.kernel, 2, 9, 10, &other),
            MLA_ERROR_INVALID_ARGUMENT); // more than 4 tokens per sequence
  EXPECT_EQ(mla_plan_create_device(p.kernel, -1, 0, 0, &other),
            MLA_ERROR_INVALID_ARGUMENT);
  // The launch must name the maxima the plan was made for.
  Batch batch = makeBatch({1}, {10}, 4, 0);
  mla_decode_args a = p.args(batch, 256);
  a.num_tokens = 4;
  EXPECT_EQ(mla_launch(p.kernel, p.plan, &a, nullptr), MLA_ERROR_SIZE_MISMATCH);
  a = p.args(batch, 100); // a cache smaller than max_kv
  EXPECT_EQ(mla_launch(p.kernel, p.plan, &a, nullptr), MLA_ERROR_SIZE_MISMATCH);
  // Host plans do not run the plan kernel alone.
  mla_plan hostPlan = nullptr;
  ASSERT_EQ(mla_plan_create(p.kernel, 4, batch.qo.data(), batch.kv.data(),
                            &hostPlan),
            MLA_ERROR_INVALID_ARGUMENT); // q_len 0 for the padding
  std::vector<int32_t> qo = {0, 1}, kv = {0, 10};
  ASSERT_EQ(mla_plan_create(p.kernel, 1, qo.data(), kv.data(), &hostPlan),
            MLA_SUCCESS);
  EXPECT_EQ(mla_launch_plan_kernel(p.kernel, hostPlan, &a, nullptr),
            MLA_ERROR_INVALID_ARGUMENT);
  mla_plan_destroy(hostPlan);
  // The cpu backend plans for itself.
  mla_context cpu = nullptr;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_CPU, 0, &cpu), MLA_SUCCESS);
  std::string bytes = serializeArtifact(p.artifact);
  mla_kernel cpuKernel = nullptr;
  ASSERT_EQ(mla_kernel_load_memory(cpu, bytes.data(), bytes.size(), &cpuKernel),
            MLA_SUCCESS);
  EXPECT_EQ(mla_plan_create_device(cpuKernel, 4, 8, 256, &other),
            MLA_ERROR_BACKEND_UNAVAILABLE);
  mla_kernel_destroy(cpuKernel);
  mla_context_destroy(cpu);
}

/// A replay through the stand-in HIP library: every step launches the same
/// three kernels with the same grids and the same argument bytes, whatever
/// the batch in the device buffers.
TEST(DevicePlan, ReplayLaunchesAreIdentical) {
  ::setenv("MLA_HIP_LIBRARY", MLA_FAKE_HIP_PATH, 1);
  std::ifstream file(MLA_TEST_FP8_ARTIFACT, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(file), {});
  mla_context ctx = nullptr;
  mla_kernel kernel = nullptr;
  mla_plan plan = nullptr;
  ASSERT_EQ(mla_context_create(MLA_BACKEND_HIP, 0, &ctx), MLA_SUCCESS)
      << mla_last_error();
  ASSERT_EQ(mla_kernel_load_memory(ctx, bytes.data(), bytes.size(), &kernel),
            MLA_SUCCESS)
      << mla_last_error();
  ASSERT_EQ(mla_plan_create_device(kernel, 8, 32, 4096, &plan), MLA_SUCCESS);
  mla_plan_info info;
  mla_plan_get_info(plan, &info);
  std::vector<void *> buffers;
  auto device = [&](size_t bytes) {
    void *ptr = nullptr;
    EXPECT_EQ(mla_malloc(ctx, bytes, &ptr), MLA_SUCCESS);
    buffers.push_back(ptr);
    return ptr;
  };
  mla_decode_args a{};
  a.q = device(32 * 16 * 576 * 2);
  a.kv = device(4096 * 576);
  a.kv_scale = device(4);
  auto *qo = static_cast<int32_t *>(device(9 * 4));
  auto *kvp = static_cast<int32_t *>(device(9 * 4));
  a.qo_indptr = qo;
  a.kv_indptr = kvp;
  a.work_list = device(info.work_list_bytes);
  a.out = device(32 * 16 * 512 * 2);
  a.lse = static_cast<float *>(device(32 * 16 * 4));
  a.workspace = device(info.workspace_bytes);
  a.workspace_bytes = info.workspace_bytes;
  a.num_seqs = 8;
  a.num_tokens = 32;
  a.num_kv_rows = 4096;

  void *fake = dlopen(MLA_FAKE_HIP_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr);
  auto count = reinterpret_cast<int (*)()>(dlsym(fake, "fakeHipLaunchCount"));
  auto get = reinterpret_cast<const char *(*)(int, unsigned *, unsigned *,
                                              const uint8_t **, size_t *)>(
      dlsym(fake, "fakeHipLaunch"));
  ASSERT_TRUE(count && get);
  struct Record {
    std::string name;
    std::vector<unsigned> grid;
    std::vector<uint8_t> kernarg;
    bool operator==(const Record &o) const {
      return name == o.name && grid == o.grid && kernarg == o.kernarg;
    }
  };
  std::vector<std::vector<Record>> steps;
  const std::vector<std::vector<int32_t>> batches[] = {
      {{0, 1, 2, 2, 2, 2, 2, 2, 2}, {0, 100, 4000, 4000, 4000, 4000, 4000, 4000, 4000}},
      {{0, 4, 8, 12, 16, 20, 24, 28, 32}, {0, 1, 2, 3, 4, 5, 6, 7, 8}},
      {{0, 3, 3, 3, 3, 3, 3, 3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0}}};
  for (const auto &batch : batches) {
    ASSERT_EQ(mla_copy_to_device(ctx, qo, batch[0].data(), 9 * 4), MLA_SUCCESS);
    ASSERT_EQ(mla_copy_to_device(ctx, kvp, batch[1].data(), 9 * 4), MLA_SUCCESS);
    int before = count();
    ASSERT_EQ(mla_launch(kernel, plan, &a, nullptr), MLA_SUCCESS)
        << mla_last_error();
    ASSERT_EQ(count(), before + 3);
    std::vector<Record> records;
    for (int k = before; k < before + 3; ++k) {
      unsigned grid[3], block[3];
      const uint8_t *kernarg;
      size_t n;
      Record r;
      r.name = get(k, grid, block, &kernarg, &n);
      r.grid.assign(grid, grid + 3);
      r.kernarg.assign(kernarg, kernarg + n);
      records.push_back(r);
    }
    EXPECT_EQ(records[0].name, "mla_plan");
    EXPECT_EQ(records[1].name, "mla_partial_decode");
    EXPECT_EQ(records[2].name, "mla_combine");
    EXPECT_EQ(records[0].grid, (std::vector<unsigned>{1, 1, 1}));
    EXPECT_EQ(records[1].grid, (std::vector<unsigned>{256, 1, 1}));
    EXPECT_EQ(records[2].grid, (std::vector<unsigned>{8, 16, 1}));
    steps.push_back(records);
  }
  EXPECT_TRUE(steps[1] == steps[0]);
  EXPECT_TRUE(steps[2] == steps[0]);
  for (void *ptr : buffers)
    mla_free(ctx, ptr);
  mla_plan_destroy(plan);
  mla_kernel_destroy(kernel);
  mla_context_destroy(ctx);
  ::unsetenv("MLA_HIP_LIBRARY");
}

} // namespace
