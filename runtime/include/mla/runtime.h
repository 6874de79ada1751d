/*===- mla/runtime.h - the mla.decode runtime, C API ------------------------===
 *
 * Loads artifacts (one compiled mla.decode configuration per file, see
 * docs/artifact.md), plans split-KV work lists and launches the kernels on a
 * backend:
 *   MLA_BACKEND_HIP  the gfx950 code object on an AMD GPU (libamdhip64.so is
 *                    loaded at run time; no ROCm is needed to build)
 *   MLA_BACKEND_EMU  the same kernels executed on the CPU with exact MFMA
 *                    semantics
 *   MLA_BACKEND_CPU  the reference lowering of mla.decode
 *   MLA_BACKEND_CUDA the sm_90a PTX on an NVIDIA Hopper GPU (the driver,
 *                    libcuda.so.1, is loaded at run time and JIT-compiles
 *                    the PTX; no CUDA toolkit is needed)
 *
 * Usage: create a context, load an artifact into it, plan once per batch
 * (host copies of the indptrs), copy the plan's work list to the device, then
 * launch once per layer. mla_launch neither allocates nor synchronizes: the
 * caller owns every buffer (q, kv, scales, indptrs, work list, out, lse,
 * workspace), so a HIP or CUDA launch can be captured in a graph. On emu and cpu,
 * "device" memory is host memory and a launch completes before it returns.
 *
 * Every function returns an mla_status; on failure, mla_last_error() gives
 * this thread's message. Handles are thread-safe for concurrent launches.
 *
 *===-----------------------------------------------------------------------===*/

#ifndef MLA_RUNTIME_H
#define MLA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLA_RUNTIME_API_VERSION 1

/* C callers may pass any int where an enum is expected; in C++ an enum
   without a fixed type cannot hold values outside its enumerators' range, so
   the runtime (C++) gives each the fixed type int and checks the value. */
#ifdef __cplusplus
#define MLA_ENUM(name) enum name : int
#else
#define MLA_ENUM(name) enum name
#endif

typedef MLA_ENUM(mla_status) {
  MLA_SUCCESS = 0,
  MLA_ERROR_INVALID_ARGUMENT = 1,    /* null pointer, bad value */
  MLA_ERROR_IO = 2,                  /* a file is missing or unreadable */
  MLA_ERROR_INVALID_ARTIFACT = 3,    /* truncated, corrupted, malformed */
  MLA_ERROR_VERSION_MISMATCH = 4,    /* artifact format of another release */
  MLA_ERROR_TARGET_MISMATCH = 5,     /* artifact built for another chip */
  MLA_ERROR_BACKEND_UNAVAILABLE = 6, /* no HIP/CUDA library, no device, no form */
  MLA_ERROR_WORKSPACE_TOO_SMALL = 7,
  MLA_ERROR_SIZE_MISMATCH = 8,       /* launch sizes differ from the plan's */
  MLA_ERROR_LAUNCH_FAILED = 9,
  MLA_ERROR_INTERNAL = 10
} mla_status;

typedef MLA_ENUM(mla_backend) {
  MLA_BACKEND_HIP = 0,
  MLA_BACKEND_EMU = 1,
  MLA_BACKEND_CPU = 2,
  MLA_BACKEND_CUDA = 3  /* sm_90a PTX through the CUDA driver (libcuda.so.1) */
} mla_backend;

typedef MLA_ENUM(mla_kv_format) {
  MLA_KV_BF16 = 0,  /* [N, Dqk] bf16 */
  MLA_KV_FP8 = 1,   /* [N, Dqk] e4m3fn, one f32 scale */
  MLA_KV_MXFP4 = 2  /* [N, Dqk/2] packed e2m1, [N, Dqk/32] e8m0 scales */
} mla_kv_format;

typedef struct mla_context_s *mla_context;
typedef struct mla_kernel_s *mla_kernel;
typedef struct mla_plan_s *mla_plan;

/* The name of a status ("MLA_ERROR_IO"); never NULL. */
const char *mla_status_name(mla_status status);
/* The message of this thread's last failed call ("" if none); valid until
 * the thread's next call into the runtime. */
const char *mla_last_error(void);

/*--- Contexts and device memory -------------------------------------------*/

/* Opens `backend`. For HIP: loads libamdhip64.so (or $MLA_HIP_LIBRARY) and
 * selects GPU `device`; emu and cpu ignore `device`. */
mla_status mla_context_create(mla_backend backend, int device,
                              mla_context *context);
mla_status mla_context_destroy(mla_context context);
/* The device's architecture ("gfx950", "host"). */
mla_status mla_context_arch(mla_context context, const char **arch);

mla_status mla_malloc(mla_context context, size_t bytes, void **ptr);
mla_status mla_free(mla_context context, void *ptr);
mla_status mla_copy_to_device(mla_context context, void *dst, const void *src,
                              size_t bytes);
mla_status mla_copy_to_host(mla_context context, void *dst, const void *src,
                            size_t bytes);
/* Waits for the work queued on `stream` (NULL: the default stream). */
mla_status mla_synchronize(mla_context context, void *stream);

/*--- Kernels ---------------------------------------------------------------*/

mla_status mla_kernel_load_file(mla_context context, const char *path,
                                mla_kernel *kernel);
mla_status mla_kernel_load_memory(mla_context context, const void *data,
                                  size_t bytes, mla_kernel *kernel);
mla_status mla_kernel_destroy(mla_kernel kernel);

typedef struct mla_kernel_info {
  mla_kv_format kv_format;
  int32_t num_heads; /* H */
  int32_t qk_dim;    /* Dqk */
  int32_t v_dim;     /* Dv */
  float sm_scale;    /* as applied */
  int32_t max_query_tokens_per_seq;
  char target[32];   /* the chip the artifact was built for */
  int32_t page_size; /* rows per page of a paged cache; 0: contiguous */
} mla_kernel_info;

mla_status mla_kernel_get_info(mla_kernel kernel, mla_kernel_info *info);

/*--- Planning --------------------------------------------------------------*/

/* Plans the split-KV work list for one batch from host copies of the
 * indptrs ([num_seqs + 1] each; sequence b has qo_indptr[b+1] - qo_indptr[b]
 * query tokens, 1..4, and kv_indptr[b+1] - kv_indptr[b] cache rows). */
mla_status mla_plan_create(mla_kernel kernel, int32_t num_seqs,
                           const int32_t *qo_indptr, const int32_t *kv_indptr,
                           mla_plan *plan);
/* The same for a paged kernel (page_size P > 0): kv_indptr counts pages
 * and sequence b's last page holds kv_last_page_len[b] rows (1..P; 0 for a
 * sequence without pages), so it has (pages - 1) * P + last cache rows. */
mla_status mla_plan_create_paged(mla_kernel kernel, int32_t num_seqs,
                                 const int32_t *qo_indptr,
                                 const int32_t *kv_indptr,
                                 const int32_t *kv_last_page_len,
                                 mla_plan *plan);
/* A device plan, for graph capture and replay (docs/runtime.md): sized once
 * from maxima, it plans each launch on the device. Every launch queues the
 * plan kernel, which reads the batch from the device indptrs and writes
 * the work list into args.work_list, then the partial and combine kernels
 * on a fixed grid: the kernels, grids and arguments depend only on the
 * maxima, so one captured launch replays every step. A launch passes
 * num_seqs = max_seqs and num_tokens = max_tokens (the rows of q, out and
 * lse); sequences past the step's batch have no tokens and no cache
 * (repeat the last indptr entry). max_kv is the most cache rows
 * (contiguous: num_kv_rows must be at least it) or page-table entries
 * (paged: kv_indices holds max_kv) a step may use. A step beyond them, or
 * with indptrs that do not start at 0 or decrease, or a q_len above 4, is
 * not run: the status word (info.status_offset) says why and out and lse
 * are not written. hip, cuda and emu only (the cpu backend plans for
 * itself). */
mla_status mla_plan_create_device(mla_kernel kernel, int32_t max_seqs,
                                  int32_t max_tokens, int32_t max_kv,
                                  mla_plan *plan);
mla_status mla_plan_destroy(mla_plan plan);

typedef struct mla_plan_info {
  int32_t num_seqs;
  int32_t num_tokens;   /* T = qo_indptr[num_seqs] */
  int32_t num_kv_rows;  /* rows the batch uses: kv_indptr[num_seqs];
                           0 for a paged plan (kv_indptr counts pages) */
  int32_t num_work_items;
  size_t work_list_bytes; /* the device buffer mla_launch reads */
  size_t workspace_bytes; /* scratch mla_launch writes (partials) */
  /* A device plan: the sizes above are maxima, and the int32 at byte
   * status_offset of the work list buffer is the plan kernel's verdict on
   * the last launch's batch: 0 planned and run, else the OR of
   * MLA_PLAN_BAD_INDPTR, MLA_PLAN_TOO_MANY_TOKENS, MLA_PLAN_TOO_MANY_KV,
   * MLA_PLAN_WORK_LIST_FULL (nothing was run). */
  int32_t device_plan;
  size_t status_offset;
} mla_plan_info;

#define MLA_PLAN_BAD_INDPTR 1       /* not from 0, decreasing, q_len > 4 */
#define MLA_PLAN_TOO_MANY_TOKENS 2  /* qo_indptr[B] > max_tokens */
#define MLA_PLAN_TOO_MANY_KV 4      /* kv_indptr[B] > the cache or page table */
#define MLA_PLAN_WORK_LIST_FULL 8

mla_status mla_plan_get_info(mla_plan plan, mla_plan_info *info);
/* Writes the work list (work_list_bytes) to host memory; copy it to a
 * device buffer once and pass that to every launch with this plan. A
 * device plan has none to copy: its launches write it. */
mla_status mla_plan_get_work_list(mla_plan plan, void *host_dst, size_t bytes);

/*--- Launching -------------------------------------------------------------*/

/* q, kv, out and workspace: 16-byte aligned on the GPU backends (hip, cuda,
 * emu), whose kernels read and write them in vectors of up to 16 bytes;
 * mla_launch refuses them otherwise. */
typedef struct mla_decode_args {
  const void *q;            /* [T, H, Dqk] bf16 */
  const void *kv;           /* [N, row bytes] in the artifact's format */
  const void *kv_scale;     /* fp8: f32[1]; mxfp4: [N, Dqk/32] e8m0; bf16: NULL */
  const int32_t *qo_indptr; /* [num_seqs + 1], device */
  const int32_t *kv_indptr; /* [num_seqs + 1], device */
  void *work_list;          /* device copy of mla_plan_get_work_list;
                               device plans: work_list_bytes the launch
                               writes */
  void *out;                /* [T, H, Dv] bf16 */
  float *lse;               /* [T, H] f32, natural log */
  void *workspace;
  size_t workspace_bytes;
  /* The batch's sizes: num_seqs and num_tokens must equal the plan's;
   * num_kv_rows is the cache's N, at least the plan's (a pool may be larger
   * than the batch: rows past kv_indptr[num_seqs] may hold anything, NaN
   * codes included, and are never read). */
  int32_t num_seqs;
  int32_t num_tokens;
  int32_t num_kv_rows;
  /* Paged kernels: kv is [num_kv_rows / P, P, row] (num_kv_rows a multiple
   * of P), kv_indptr counts pages, kv_indices [kv_indptr[num_seqs]] holds
   * the page ids (device), kv_last_page_len [num_seqs] (device) the rows of
   * each sequence's last page. Must be NULL for contiguous kernels. */
  const int32_t *kv_indices;
  const int32_t *kv_last_page_len;
} mla_decode_args;

/* Queues the decode on `stream` (NULL: the default stream). */
mla_status mla_launch(mla_kernel kernel, mla_plan plan,
                      const mla_decode_args *args, void *stream);

/* Queues only a device plan's plan kernel: it writes the work list of the
 * batch in `args` into args->work_list (and the status word) and runs no
 * decode; for inspecting what the device planned. */
mla_status mla_launch_plan_kernel(mla_kernel kernel, mla_plan plan,
                                  const mla_decode_args *args, void *stream);

/* The emu backend's model of where the cache bytes of a launch come from
 * (docs/runtime.md): the chip deals workgroup ids round-robin to its XCDs
 * (id % xcds), each XCD has one L2, and a cache byte comes from HBM once
 * per XCD whose workgroups read it, provided those workgroups run together
 * (their dispatch slots on the XCD less than cus_per_xcd apart). So the HBM
 * reads are cache_bytes + other_xcd_bytes, and cache_bytes alone when
 * other_xcd_bytes is 0 and max_slot_span < cus_per_xcd. */
typedef struct mla_kv_traffic {
  uint64_t cache_bytes;     /* distinct cache bytes read (mxfp4: with scales) */
  uint64_t dma_bytes;       /* cache bytes all workgroups DMA'd into LDS */
  uint64_t other_xcd_bytes; /* reads of a byte on another XCD than its first */
  uint64_t max_slot_span;   /* widest slot distance of a byte's readers on an XCD */
  int32_t xcds;             /* XCDs of the chip */
  int32_t cus_per_xcd;      /* partial-kernel workgroups an XCD runs at once */
} mla_kv_traffic;

/* emu contexts only: `enable` != 0 zeroes the totals and models the partial
 * kernel's cache reads of every later launch (4 bytes of host memory per
 * cache byte while a launch runs); 0 stops. */
mla_status mla_emu_model_kv_traffic(mla_context context, int enable);
/* The totals over the launches modelled since it was enabled. */
mla_status mla_emu_kv_traffic(mla_context context, mla_kv_traffic *traffic);

/* emu contexts only: `enable` != 0 (the default) checks the LDS accesses of
 * every later launch against the hazard model (docs/emu.md): a race between
 * waves with no barrier between them, or a read of LDS bytes whose DMA no
 * memory_counter_wait has retired, fails the launch with
 * MLA_ERROR_LAUNCH_FAILED and a message naming the kernel, workgroup,
 * waves, byte range and operations. 0 skips the checks (faster); LDS DMAs
 * still land only when a wait retires them. */
mla_status mla_emu_check_hazards(mla_context context, int enable);
/* emu contexts only: 0 (the default) runs a workgroup's lanes in id order;
 * any other value seeds a random order (lanes shuffled at every scheduling
 * step and switched at LDS accesses), so that ordering assumptions the
 * hazard model cannot see show up as wrong numbers. */
mla_status mla_emu_schedule_seed(mla_context context, uint64_t seed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLA_RUNTIME_H */
