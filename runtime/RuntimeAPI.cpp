//===- RuntimeAPI.cpp - the C API of runtime.h ----------------------------===//
//
// Validates every call before a backend sees it: null handles and pointers,
// indptrs, the plan/launch agreement and the workspace size. Messages are
// per thread, so concurrent launches on one context never mix them.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime.h"

#include "mla/ABI.h"
#include "mla/Runtime/Artifact.h"
#include "mla/Runtime/Backend.h"
#include "mla/Runtime/SplitPlanner.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace mla;

static_assert(MLA_PLAN_BAD_INDPTR == plan_status::kBadIndptr &&
                  MLA_PLAN_TOO_MANY_TOKENS == plan_status::kTooManyTokens &&
                  MLA_PLAN_TOO_MANY_KV == plan_status::kTooManyKVRows &&
                  MLA_PLAN_WORK_LIST_FULL == plan_status::kWorkListFull,
              "the status bits of runtime.h and ABI.h must agree");
static_assert(sizeof(WorkItem) == 4 * sizeof(int32_t) &&
                  sizeof(WorkUnit) == 3 * sizeof(int32_t),
              "the work list's rows are these structs' bytes");

static_assert(MLA_ERROR_INTERNAL == static_cast<int>(Status::Internal),
              "mla_status and mla::Status must agree");
static_assert(MLA_KV_BF16 == static_cast<int>(CacheFormat::BF16) &&
                  MLA_KV_FP8 == static_cast<int>(CacheFormat::FP8) &&
                  MLA_KV_MXFP4 == static_cast<int>(CacheFormat::MXFP4),
              "mla_kv_format and mla::CacheFormat must agree");

struct mla_context_s {
  mla_backend kind;
  std::unique_ptr<rt::Backend> backend;
  std::string arch;
};

struct mla_kernel_s {
  mla_context context;
  Artifact artifact; // the manifest; the forms are dropped after loading
  std::unique_ptr<rt::LoadedKernel> loaded;
};

namespace {
constexpr size_t kWorkspaceAlign = 256;

size_t alignUp(size_t n) {
  return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}
} // namespace

struct mla_plan_s {
  mla_kernel kernel;
  int32_t numSeqs = 0, numTokens = 0, numKVRows = 0, numWorkItems = 0;
  int32_t numWorkUnits = 0;
  // Whether a launch runs the combine (LaunchBuffers::combines).
  bool combines = true;
  // The combine grid's column slices (mla::combineSlices).
  // Device plans: one, the items being unknown at launch.
  int32_t combineSlices = 1;
  // Paged: the pages the batch's page table lists (kv_indptr[num_seqs]);
  // a device plan: the most its page table may list.
  int32_t numKVIndices = 0;
  // A device plan: sizes are maxima and the plan kernel writes the list.
  bool device = false;
  // The work list, in int32 words: items [I][4], item_indptr [B + 1],
  // units [U][3], workgroup_unit_indptr [G + 1], the status word.
  std::vector<int32_t> workList;
  size_t itemIndptrAt = 0, unitsAt = 0, workgroupUnitsAt = 0, statusAt = 0;
  size_t partialLseOffset = 0, workspaceBytes = 0;

  /// Lays out the work list and workspace for I items, U units, B
  /// sequences and G workgroups (zero-filled).
  void layOut(const Artifact &a, int64_t workgroups) {
    itemIndptrAt = 4 * (size_t)numWorkItems;
    unitsAt = itemIndptrAt + numSeqs + 1;
    workgroupUnitsAt = unitsAt + 3 * (size_t)numWorkUnits;
    statusAt = workgroupUnitsAt + workgroups + 1;
    workList.assign(statusAt + 1, 0);
    size_t partials = (size_t)numWorkItems * 4 * a.numHeads;
    partialLseOffset = alignUp(partials * a.vDim * sizeof(float));
    workspaceBytes = partialLseOffset + alignUp(partials * sizeof(float));
  }
};

namespace {
thread_local std::string lastError;

template <typename... Parts>
mla_status fail(Status status, const Parts &...parts) {
  lastError = rt::str(parts...);
  return static_cast<mla_status>(status);
}

mla_status fail(rt::Error err) {
  lastError = err.message();
  return static_cast<mla_status>(err.status());
}

#define MLA_REQUIRE(cond, what)                                                \
  do {                                                                         \
    if (!(cond))                                                               \
      return fail(Status::InvalidArgument, what);                              \
  } while (false)


mla_status loadArtifact(mla_context context, rt::Expected<Artifact> artifact,
                        mla_kernel *kernel) {
  if (!artifact)
    return fail(artifact.takeError());
  auto loaded = context->backend->load(*artifact);
  if (!loaded)
    return fail(loaded.takeError());
  auto *k = new mla_kernel_s{context, std::move(*artifact), std::move(*loaded)};
  k->artifact.hsaco.clear();
  k->artifact.emuModule.clear();
  k->artifact.cpuModule.clear();
  *kernel = k;
  return MLA_SUCCESS;
}
} // namespace

extern "C" {

const char *mla_status_name(mla_status status) {
  switch (status) {
  case MLA_SUCCESS:
    return "MLA_SUCCESS";
  case MLA_ERROR_INVALID_ARGUMENT:
    return "MLA_ERROR_INVALID_ARGUMENT";
  case MLA_ERROR_IO:
    return "MLA_ERROR_IO";
  case MLA_ERROR_INVALID_ARTIFACT:
    return "MLA_ERROR_INVALID_ARTIFACT";
  case MLA_ERROR_VERSION_MISMATCH:
    return "MLA_ERROR_VERSION_MISMATCH";
  case MLA_ERROR_TARGET_MISMATCH:
    return "MLA_ERROR_TARGET_MISMATCH";
  case MLA_ERROR_BACKEND_UNAVAILABLE:
    return "MLA_ERROR_BACKEND_UNAVAILABLE";
  case MLA_ERROR_WORKSPACE_TOO_SMALL:
    return "MLA_ERROR_WORKSPACE_TOO_SMALL";
  case MLA_ERROR_SIZE_MISMATCH:
    return "MLA_ERROR_SIZE_MISMATCH";
  case MLA_ERROR_LAUNCH_FAILED:
    return "MLA_ERROR_LAUNCH_FAILED";
  case MLA_ERROR_INTERNAL:
    return "MLA_ERROR_INTERNAL";
  }
  return "MLA_ERROR_UNKNOWN";
}

const char *mla_last_error(void) { return lastError.c_str(); }

mla_status mla_context_create(mla_backend backend, int device,
                              mla_context *context) {
  MLA_REQUIRE(context, "mla_context_create: context is NULL");
  *context = nullptr;
  std::unique_ptr<rt::Backend> impl;
  switch (backend) {
  case MLA_BACKEND_HIP: {
    auto hip = rt::createHipBackend(device);
    if (!hip)
      return fail(hip.takeError());
    impl = std::move(*hip);
    break;
  }
  case MLA_BACKEND_CUDA: {
    auto cuda = rt::createCudaBackend(device);
    if (!cuda)
      return fail(cuda.takeError());
    impl = std::move(*cuda);
    break;
  }
  case MLA_BACKEND_EMU:
  case MLA_BACKEND_CPU: {
    auto jit = rt::createJitBackend(backend == MLA_BACKEND_EMU
                                        ? rt::JitBackendKind::Emu
                                        : rt::JitBackendKind::Cpu);
    if (!jit)
      return fail(jit.takeError());
    impl = std::move(*jit);
    break;
  }
  default:
    return fail(Status::InvalidArgument, "mla_context_create: unknown backend ",
                static_cast<int>(backend));
  }
  std::string arch = impl->arch();
  *context = new mla_context_s{backend, std::move(impl), std::move(arch)};
  return MLA_SUCCESS;
}

mla_status mla_context_destroy(mla_context context) {
  MLA_REQUIRE(context, "mla_context_destroy: context is NULL");
  delete context;
  return MLA_SUCCESS;
}

mla_status mla_context_arch(mla_context context, const char **arch) {
  MLA_REQUIRE(context && arch, "mla_context_arch: NULL argument");
  *arch = context->arch.c_str();
  return MLA_SUCCESS;
}

mla_status mla_malloc(mla_context context, size_t bytes, void **ptr) {
  MLA_REQUIRE(context && ptr, "mla_malloc: NULL argument");
  *ptr = nullptr;
  if (rt::Error err = context->backend->allocate(bytes, ptr))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_free(mla_context context, void *ptr) {
  MLA_REQUIRE(context, "mla_free: context is NULL");
  if (!ptr)
    return MLA_SUCCESS;
  if (rt::Error err = context->backend->release(ptr))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_copy_to_device(mla_context context, void *dst, const void *src,
                              size_t bytes) {
  MLA_REQUIRE(context && ((dst && src) || bytes == 0),
              "mla_copy_to_device: NULL argument");
  if (rt::Error err = context->backend->copyToDevice(dst, src, bytes))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_copy_to_host(mla_context context, void *dst, const void *src,
                            size_t bytes) {
  MLA_REQUIRE(context && ((dst && src) || bytes == 0),
              "mla_copy_to_host: NULL argument");
  if (rt::Error err = context->backend->copyToHost(dst, src, bytes))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_synchronize(mla_context context, void *stream) {
  MLA_REQUIRE(context, "mla_synchronize: context is NULL");
  if (rt::Error err = context->backend->synchronize(stream))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_kernel_load_file(mla_context context, const char *path,
                                mla_kernel *kernel) {
  MLA_REQUIRE(context && path && kernel, "mla_kernel_load_file: NULL argument");
  *kernel = nullptr;
  return loadArtifact(context, readArtifactFile(path), kernel);
}

mla_status mla_kernel_load_memory(mla_context context, const void *data,
                                  size_t bytes, mla_kernel *kernel) {
  MLA_REQUIRE(context && data && kernel,
              "mla_kernel_load_memory: NULL argument");
  *kernel = nullptr;
  return loadArtifact(
      context,
      parseArtifact(std::string_view(static_cast<const char *>(data), bytes)),
      kernel);
}

mla_status mla_kernel_destroy(mla_kernel kernel) {
  MLA_REQUIRE(kernel, "mla_kernel_destroy: kernel is NULL");
  delete kernel;
  return MLA_SUCCESS;
}

mla_status mla_kernel_get_info(mla_kernel kernel, mla_kernel_info *info) {
  MLA_REQUIRE(kernel && info, "mla_kernel_get_info: NULL argument");
  const Artifact &a = kernel->artifact;
  *info = mla_kernel_info{};
  info->kv_format = static_cast<mla_kv_format>(a.format);
  info->num_heads = static_cast<int32_t>(a.numHeads);
  info->qk_dim = static_cast<int32_t>(a.qkDim);
  info->v_dim = static_cast<int32_t>(a.vDim);
  info->sm_scale = static_cast<float>(
      a.smScale > 0.0 ? a.smScale : 1.0 / std::sqrt((double)a.qkDim));
  info->max_query_tokens_per_seq = static_cast<int32_t>(kMaxQueryTokens);
  std::snprintf(info->target, sizeof info->target, "%s", a.chip.c_str());
  info->page_size = static_cast<int32_t>(a.pageSize);
  return MLA_SUCCESS;
}

namespace {
/// The query lengths (1..4 each) of a batch, or a failure naming `api`.
mla_status queryLengths(const char *api, int32_t num_seqs,
                        const int32_t *qo_indptr) {
  if (qo_indptr[0] != 0)
    return fail(Status::InvalidArgument, api, ": qo_indptr[0] must be 0");
  for (int32_t b = 0; b < num_seqs; ++b) {
    int64_t qLen = (int64_t)qo_indptr[b + 1] - qo_indptr[b];
    if (qLen < 1 || qLen > kMaxQueryTokens)
      return fail(Status::InvalidArgument, api, ": sequence ", b, " has ",
                  qLen, " query tokens (1..", kMaxQueryTokens, " supported)");
  }
  return MLA_SUCCESS;
}

/// The split options of the artifact's kernels; `qLens` gives each
/// sequence's query tokens (the workgroups its items keep busy).
SplitOptions splitOptions(const Artifact &a, const std::vector<int64_t> &qLens) {
  SplitOptions options;
  options.forcedSplits = a.forcedSplits;
  // Items on the kernels' tiles, as the device planner cuts them.
  options.kvTile = itemTile(kernelKVTile(a).value_or(kMinItemTile));
  options.workgroups = persistentWorkgroups(a).value_or(0);
  options.xcds = a.xcds;
  // The workgroups an item keeps busy: the partial kernel's row blocks
  // that hold rows of the sequence.
  if (!a.kernels.empty() && a.kernels[0].rowsPerWorkgroup > 0) {
    int64_t rows = a.kernels[0].rowsPerWorkgroup;
    int64_t heads = a.kernels[0].headsPerBlock;
    for (int64_t qLen : qLens)
      options.workgroupsPerItem.push_back(a.numHeads / heads *
                                          ((qLen * heads + rows - 1) / rows));
  }
  return options;
}

/// Plans the batch whose sequences have `lens` cache positions.
mla_status createPlan(mla_kernel kernel, int32_t num_seqs,
                      const int32_t *qo_indptr,
                      const std::vector<int64_t> &lens, mla_plan *plan) {
  const Artifact &a = kernel->artifact;
  std::vector<int64_t> qLens;
  for (int32_t b = 0; b < num_seqs; ++b)
    qLens.push_back((int64_t)qo_indptr[b + 1] - qo_indptr[b]);
  SplitOptions options = splitOptions(a, qLens);
  auto list = planSplits(a.computeUnits, lens, options);
  if (!list)
    return fail(Status::InvalidArgument, "mla_plan_create: ",
                list.takeError().message());
  auto p = std::make_unique<mla_plan_s>();
  p->kernel = kernel;
  p->numSeqs = num_seqs;
  p->numTokens = qo_indptr[num_seqs];
  p->numWorkItems = static_cast<int32_t>(list->numItems());
  p->numWorkUnits = static_cast<int32_t>(list->units.size());
  p->combines = list->needsCombine();
  p->combineSlices = static_cast<int32_t>(
      combineSlices(*list, a.numHeads, options.workgroups));
  p->layOut(a, options.workgroups);
  int32_t *words = p->workList.data();
  for (const WorkItem &item : list->items) {
    std::memcpy(words, &item, sizeof item);
    words += 4;
  }
  std::copy(list->seqItemIndptr.begin(), list->seqItemIndptr.end(),
            p->workList.begin() + p->itemIndptrAt);
  words = p->workList.data() + p->unitsAt;
  for (const WorkUnit &unit : list->units) {
    std::memcpy(words, &unit, sizeof unit);
    words += 3;
  }
  std::copy(list->workgroupUnitIndptr.begin(), list->workgroupUnitIndptr.end(),
            p->workList.begin() + p->workgroupUnitsAt);
  *plan = p.release();
  return MLA_SUCCESS;
}
} // namespace

mla_status mla_plan_create(mla_kernel kernel, int32_t num_seqs,
                           const int32_t *qo_indptr, const int32_t *kv_indptr,
                           mla_plan *plan) {
  MLA_REQUIRE(kernel && plan && qo_indptr && kv_indptr,
              "mla_plan_create: NULL argument");
  *plan = nullptr;
  MLA_REQUIRE(num_seqs >= 0, "mla_plan_create: num_seqs is negative");
  if (kernel->artifact.pageSize > 0)
    return fail(Status::InvalidArgument,
                "mla_plan_create: the kernel reads a paged cache (page size ",
                kernel->artifact.pageSize, "); use mla_plan_create_paged");
  if (mla_status s = queryLengths("mla_plan_create", num_seqs, qo_indptr))
    return s;
  if (kv_indptr[0] != 0)
    return fail(Status::InvalidArgument,
                "mla_plan_create: kv_indptr[0] must be 0");
  std::vector<int64_t> lens;
  for (int32_t b = 0; b < num_seqs; ++b) {
    int64_t kvLen = (int64_t)kv_indptr[b + 1] - kv_indptr[b];
    if (kvLen < 0)
      return fail(Status::InvalidArgument,
                  "mla_plan_create: kv_indptr decreases at sequence ", b);
    lens.push_back(kvLen);
  }
  if (mla_status s = createPlan(kernel, num_seqs, qo_indptr, lens, plan))
    return s;
  (*plan)->numKVRows = kv_indptr[num_seqs];
  return MLA_SUCCESS;
}

mla_status mla_plan_create_paged(mla_kernel kernel, int32_t num_seqs,
                                 const int32_t *qo_indptr,
                                 const int32_t *kv_indptr,
                                 const int32_t *kv_last_page_len,
                                 mla_plan *plan) {
  const char *api = "mla_plan_create_paged";
  MLA_REQUIRE(kernel && plan && qo_indptr && kv_indptr && kv_last_page_len,
              "mla_plan_create_paged: NULL argument");
  *plan = nullptr;
  MLA_REQUIRE(num_seqs >= 0, "mla_plan_create_paged: num_seqs is negative");
  int64_t pageSize = kernel->artifact.pageSize;
  if (pageSize == 0)
    return fail(Status::InvalidArgument, api,
                ": the kernel reads a contiguous cache; use mla_plan_create");
  if (mla_status s = queryLengths(api, num_seqs, qo_indptr))
    return s;
  if (kv_indptr[0] != 0)
    return fail(Status::InvalidArgument, api, ": kv_indptr[0] must be 0");
  std::vector<int64_t> lens;
  for (int32_t b = 0; b < num_seqs; ++b) {
    int64_t pages = (int64_t)kv_indptr[b + 1] - kv_indptr[b];
    int64_t last = kv_last_page_len[b];
    if (pages < 0)
      return fail(Status::InvalidArgument, api,
                  ": kv_indptr decreases at sequence ", b);
    if (pages > 0 ? last < 1 || last > pageSize : last != 0)
      return fail(Status::InvalidArgument, api, ": kv_last_page_len[", b,
                  "] = ", last, " (sequence ", b, " has ", pages,
                  " pages: 1..", pageSize, " with pages, 0 without)");
    lens.push_back(pages > 0 ? (pages - 1) * pageSize + last : 0);
    if (lens.back() > INT32_MAX)
      return fail(Status::InvalidArgument, api, ": sequence ", b, " has ",
                  lens.back(), " cache positions (at most 2^31 - 1)");
  }
  if (mla_status s = createPlan(kernel, num_seqs, qo_indptr, lens, plan))
    return s;
  (*plan)->numKVIndices = kv_indptr[num_seqs];
  return MLA_SUCCESS;
}

mla_status mla_plan_create_device(mla_kernel kernel, int32_t max_seqs,
                                  int32_t max_tokens, int32_t max_kv,
                                  mla_plan *plan) {
  const char *api = "mla_plan_create_device";
  MLA_REQUIRE(kernel && plan, "mla_plan_create_device: NULL argument");
  *plan = nullptr;
  MLA_REQUIRE(max_seqs >= 0 && max_tokens >= 0 && max_kv >= 0,
              "mla_plan_create_device: a maximum is negative");
  const Artifact &a = kernel->artifact;
  if (!kernel->context->backend->usesWorkList() || a.kernels.empty())
    return fail(Status::BackendUnavailable, api,
                ": device plans run the plan kernel, on the hip, cuda and "
                "emu backends (this ",
                kernel->context->arch,
                " context runs the reference form, which plans for itself)");
  if (max_tokens > max_seqs * kMaxQueryTokens)
    return fail(Status::InvalidArgument, api, ": max_tokens ", max_tokens,
                " exceeds ", kMaxQueryTokens, " per sequence for ", max_seqs,
                " sequences");
  const ArtifactKernel &partial = a.kernels[0];
  int64_t rows = partial.rowsPerWorkgroup, heads = partial.headsPerBlock;
  int64_t maxWorkgroupsPerItem =
      rows > 0 ? a.numHeads / heads * ((kMaxQueryTokens * heads + rows - 1) / rows)
               : 1;
  SplitOptions options = splitOptions(a, {});
  WorkListBounds bounds = workListBounds(a.computeUnits, max_seqs,
                                         maxWorkgroupsPerItem, options);
  if (bounds.units > INT32_MAX / 4)
    return fail(Status::InvalidArgument, api, ": ", max_seqs,
                " sequences need more work units than 32-bit sizes hold");
  auto p = std::make_unique<mla_plan_s>();
  p->kernel = kernel;
  p->device = true;
  p->numSeqs = max_seqs;
  p->numTokens = max_tokens;
  (a.pageSize > 0 ? p->numKVIndices : p->numKVRows) = max_kv;
  p->numWorkItems = static_cast<int32_t>(bounds.items);
  p->numWorkUnits = static_cast<int32_t>(bounds.units);
  p->layOut(a, options.workgroups);
  *plan = p.release();
  return MLA_SUCCESS;
}

mla_status mla_plan_destroy(mla_plan plan) {
  MLA_REQUIRE(plan, "mla_plan_destroy: plan is NULL");
  delete plan;
  return MLA_SUCCESS;
}

mla_status mla_plan_get_info(mla_plan plan, mla_plan_info *info) {
  MLA_REQUIRE(plan && info, "mla_plan_get_info: NULL argument");
  info->num_seqs = plan->numSeqs;
  info->num_tokens = plan->numTokens;
  info->num_kv_rows = plan->numKVRows;
  info->num_work_items = plan->numWorkItems;
  info->work_list_bytes = plan->workList.size() * sizeof(int32_t);
  info->workspace_bytes = plan->workspaceBytes;
  info->device_plan = plan->device;
  info->status_offset = plan->statusAt * sizeof(int32_t);
  return MLA_SUCCESS;
}

mla_status mla_plan_get_work_list(mla_plan plan, void *host_dst, size_t bytes) {
  MLA_REQUIRE(plan && host_dst, "mla_plan_get_work_list: NULL argument");
  if (plan->device)
    return fail(Status::InvalidArgument,
                "mla_plan_get_work_list: a device plan's work list is "
                "written by its plan kernel at every launch");
  size_t need = plan->workList.size() * sizeof(int32_t);
  if (bytes < need)
    return fail(Status::InvalidArgument, "mla_plan_get_work_list: the buffer has ",
                bytes, " bytes, the work list ", need);
  std::memcpy(host_dst, plan->workList.data(), need);
  return MLA_SUCCESS;
}

namespace {
/// A paged kernel's launch names its page table and a pool of whole pages;
/// a contiguous one names none. Page ids are not read on the host: the
/// kernels clamp them into the pool.
mla_status checkPages(const Artifact &a, mla_plan plan,
                      const mla_decode_args *args) {
  bool hasTable = args->kv_indices || args->kv_last_page_len;
  if (a.pageSize == 0)
    return hasTable ? fail(Status::InvalidArgument,
                           "mla_launch: args->kv_indices and "
                           "kv_last_page_len must be NULL for a kernel that "
                           "reads a contiguous cache")
                    : MLA_SUCCESS;
  if (plan->numSeqs > 0 && !args->kv_last_page_len)
    return fail(Status::InvalidArgument,
                "mla_launch: args->kv_last_page_len is NULL (paged kernel)");
  if (plan->numKVIndices > 0 && !args->kv_indices)
    return fail(Status::InvalidArgument,
                "mla_launch: args->kv_indices is NULL (paged kernel)");
  if (args->num_kv_rows < 0 || args->num_kv_rows % a.pageSize != 0 ||
      (plan->numKVIndices > 0 && args->num_kv_rows == 0))
    return fail(Status::SizeMismatch, "mla_launch: num_kv_rows ",
                args->num_kv_rows, " is not a positive multiple of the page "
                "size ", a.pageSize);
  return MLA_SUCCESS;
}
} // namespace

namespace {
mla_status launch(mla_kernel kernel, mla_plan plan,
                  const mla_decode_args *args, void *stream, bool planOnly) {
  MLA_REQUIRE(kernel && plan && args, "mla_launch: NULL argument");
  MLA_REQUIRE(plan->kernel == kernel,
              "mla_launch: the plan was made for another kernel");
  if (args->num_seqs != plan->numSeqs || args->num_tokens != plan->numTokens)
    return fail(Status::SizeMismatch, "mla_launch: the batch (num_seqs ",
                args->num_seqs, ", num_tokens ", args->num_tokens,
                ") is not the plan's (", plan->numSeqs, ", ", plan->numTokens,
                ")");
  // The cache may be a pool larger than the batch: rows past
  // kv_indptr[num_seqs] belong to no sequence and are never read.
  if (mla_status s = checkPages(kernel->artifact, plan, args))
    return s;
  if (args->num_kv_rows < plan->numKVRows)
    return fail(Status::SizeMismatch, "mla_launch: the cache has num_kv_rows ",
                args->num_kv_rows, " rows; the plan's batch uses ",
                plan->numKVRows, " (kv_indptr[num_seqs])");
  const Artifact &a = kernel->artifact;
  bool usesWorkList = kernel->context->backend->usesWorkList();
  if (usesWorkList && args->workspace_bytes < plan->workspaceBytes)
    return fail(Status::WorkspaceTooSmall, "mla_launch: the workspace has ",
                args->workspace_bytes, " bytes; the plan needs ",
                plan->workspaceBytes);
  if (plan->numTokens == 0)
    return MLA_SUCCESS;
  auto missing = [&](const void *ptr, const char *name) {
    return ptr ? MLA_SUCCESS
               : fail(Status::InvalidArgument, "mla_launch: args->", name,
                      " is NULL");
  };
  for (auto [ptr, name] : std::initializer_list<std::pair<const void *, const char *>>{
           {args->q, "q"}, {args->qo_indptr, "qo_indptr"},
           {args->kv_indptr, "kv_indptr"}, {args->out, "out"},
           {args->lse, "lse"}})
    if (mla_status s = missing(ptr, name))
      return s;
  bool readsCache = plan->numKVRows > 0 || plan->numKVIndices > 0;
  if (readsCache)
    if (mla_status s = missing(args->kv, "kv"))
      return s;
  if (a.format == CacheFormat::FP8 ||
      (a.format == CacheFormat::MXFP4 && readsCache))
    if (mla_status s = missing(args->kv_scale, "kv_scale"))
      return s;
  if (usesWorkList) {
    if (mla_status s = missing(args->work_list, "work_list"))
      return s;
    if (mla_status s = missing(args->workspace, "workspace"))
      return s;
    // The GPU kernels read Q and the cache in 16-byte vectors (sm_90a:
    // 16-byte cp.async) and write out and the partials (the workspace) in
    // vectors of up to 16 bytes.
    auto misaligned = [](const void *ptr) {
      return reinterpret_cast<uintptr_t>(ptr) % 16 != 0;
    };
    const char *name = misaligned(args->q) ? "q"
                       : readsCache && misaligned(args->kv) ? "kv"
                       : misaligned(args->out)             ? "out"
                       : misaligned(args->workspace)       ? "workspace"
                                                           : nullptr;
    if (name)
      return fail(Status::InvalidArgument, "mla_launch: args->", name,
                  " is not 16-byte aligned (the kernels access it in "
                  "vectors of up to 16 bytes)");
  }

  rt::LaunchBuffers b;
  b.q = args->q;
  b.kv = args->kv;
  b.kvScale = args->kv_scale;
  b.qoIndptr = args->qo_indptr;
  b.kvIndptr = args->kv_indptr;
  b.kvIndices = args->kv_indices;
  b.kvLastPageLen = args->kv_last_page_len;
  if (auto *list = static_cast<int32_t *>(args->work_list)) {
    b.workItems = list;
    b.itemIndptr = list + plan->itemIndptrAt;
    b.workUnits = list + plan->unitsAt;
    b.workgroupUnitIndptr = list + plan->workgroupUnitsAt;
    b.planStatus = list + plan->statusAt;
  }
  b.devicePlan = plan->device;
  b.planOnly = planOnly;
  b.out = args->out;
  b.lse = args->lse;
  auto *workspace = static_cast<uint8_t *>(args->workspace);
  b.partialOut = reinterpret_cast<float *>(workspace);
  b.partialLse = workspace ? reinterpret_cast<float *>(workspace +
                                                       plan->partialLseOffset)
                           : nullptr;
  b.numSeqs = plan->numSeqs;
  b.numTokens = plan->numTokens;
  b.numKVRows = args->num_kv_rows;
  b.numWorkItems = plan->numWorkItems;
  b.numWorkUnits = plan->numWorkUnits;
  b.combines = plan->combines;
  b.combineSlices = plan->combineSlices;
  b.pageSize = a.pageSize;
  b.numKVIndices = plan->numKVIndices;
  if (rt::Error err = kernel->loaded->launch(b, stream))
    return fail(std::move(err));
  return MLA_SUCCESS;
}
} // namespace

mla_status mla_launch(mla_kernel kernel, mla_plan plan,
                      const mla_decode_args *args, void *stream) {
  return launch(kernel, plan, args, stream, /*planOnly=*/false);
}

mla_status mla_launch_plan_kernel(mla_kernel kernel, mla_plan plan,
                                  const mla_decode_args *args, void *stream) {
  if (plan && !plan->device)
    return fail(Status::InvalidArgument,
                "mla_launch_plan_kernel: the plan is a host plan");
  return launch(kernel, plan, args, stream, /*planOnly=*/true);
}

mla_status mla_emu_model_kv_traffic(mla_context context, int enable) {
  MLA_REQUIRE(context, "mla_emu_model_kv_traffic: context is NULL");
  if (rt::Error err = context->backend->modelKVTraffic(enable != 0))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_emu_check_hazards(mla_context context, int enable) {
  MLA_REQUIRE(context, "mla_emu_check_hazards: context is NULL");
  if (rt::Error err = context->backend->checkHazards(enable != 0))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_emu_schedule_seed(mla_context context, uint64_t seed) {
  MLA_REQUIRE(context, "mla_emu_schedule_seed: context is NULL");
  if (rt::Error err = context->backend->scheduleSeed(seed))
    return fail(std::move(err));
  return MLA_SUCCESS;
}

mla_status mla_emu_kv_traffic(mla_context context, mla_kv_traffic *traffic) {
  MLA_REQUIRE(context && traffic, "mla_emu_kv_traffic: NULL argument");
  auto totals = context->backend->kvTraffic();
  if (!totals)
    return fail(totals.takeError());
  *traffic = {totals->cacheBytes,    totals->dmaBytes,
              totals->otherXcdBytes, totals->maxSlotSpan,
              totals->xcds,          totals->cusPerXcd};
  return MLA_SUCCESS;
}

} // extern "C"
