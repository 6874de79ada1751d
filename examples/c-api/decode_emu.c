/* decode_emu.c - one mla.decode through the runtime's C API, on the emu
 * backend, checked against a float64 reference computed here.
 *
 * Uses only the installed header <mla/runtime.h> and libMLARuntime:
 *   cc decode_emu.c -I$PREFIX/include -L$PREFIX/lib -lMLARuntime \
 *      -Wl,-rpath,$PREFIX/lib -lm -o decode_emu
 *   $PREFIX/bin/mla-compile examples/decode_fp8.mlir -o decode_fp8.mla
 *   ./decode_emu decode_fp8.mla
 */
#include <mla/runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    mla_status status_ = (call);                                               \
    if (status_ != MLA_SUCCESS) {                                              \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mla_status_name(status_), \
              mla_last_error());                                               \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static uint32_t rng = 12345u;
static uint32_t next(void) {
  rng = rng * 1664525u + 1013904223u;
  return rng >> 8;
}

static uint16_t to_bf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(bits >> 16);
}
static double from_bf16(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float x;
  memcpy(&x, &bits, 4);
  return x;
}
static double from_e4m3(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  double v = e == 0 ? m / 8.0 * ldexp(1.0, -6) : (1.0 + m / 8.0) * ldexp(1.0, e - 7);
  return (c & 0x80) ? -v : v;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ARTIFACT (an fp8 mla.decode from mla-compile)\n",
            argv[0]);
    return 1;
  }
  mla_context ctx;
  mla_kernel kernel;
  mla_kernel_info info;
  CHECK(mla_context_create(MLA_BACKEND_EMU, 0, &ctx));
  CHECK(mla_kernel_load_file(ctx, argv[1], &kernel));
  CHECK(mla_kernel_get_info(kernel, &info));
  if (info.kv_format != MLA_KV_FP8) {
    fprintf(stderr, "this example generates fp8 caches\n");
    return 1;
  }
  const int H = info.num_heads, D = info.qk_dim, Dv = info.v_dim;

  /* Three sequences: kv lengths and query tokens (MTP-style q_len > 1). */
  enum { B = 3 };
  const int kv_len[B] = {37, 300, 129}, q_len[B] = {1, 3, 2};
  int32_t qo_indptr[B + 1] = {0}, kv_indptr[B + 1] = {0};
  for (int b = 0; b < B; ++b) {
    qo_indptr[b + 1] = qo_indptr[b] + q_len[b];
    kv_indptr[b + 1] = kv_indptr[b] + kv_len[b];
  }
  const int T = qo_indptr[B], N = kv_indptr[B];
  uint16_t *q = malloc(sizeof *q * T * H * D);
  uint8_t *kv = malloc((size_t)N * D);
  float scale = 0.02f;
  for (int i = 0; i < T * H * D; ++i)
    q[i] = to_bf16(((int)(next() % 2001) - 1000) * 5e-5f);
  for (int i = 0; i < N * D; ++i) /* e4m3 codes, exponents 4..10 */
    kv[i] = (uint8_t)((next() & 0x80) | ((4 + next() % 7) << 3) | (next() & 7));

  mla_plan plan;
  mla_plan_info pinfo;
  CHECK(mla_plan_create(kernel, B, qo_indptr, kv_indptr, &plan));
  CHECK(mla_plan_get_info(plan, &pinfo));
  void *work_list_host = malloc(pinfo.work_list_bytes);
  CHECK(mla_plan_get_work_list(plan, work_list_host, pinfo.work_list_bytes));
  printf("plan: %d sequences, %d work items, work list %zu B, workspace %zu B\n",
         pinfo.num_seqs, pinfo.num_work_items, pinfo.work_list_bytes,
         pinfo.workspace_bytes);

  /* Device buffers (host memory on emu), all owned here. */
  void *d_q, *d_kv, *d_scale, *d_qo, *d_kvp, *d_work, *d_out, *d_lse, *d_ws;
  CHECK(mla_malloc(ctx, sizeof *q * T * H * D, &d_q));
  CHECK(mla_malloc(ctx, (size_t)N * D, &d_kv));
  CHECK(mla_malloc(ctx, sizeof scale, &d_scale));
  CHECK(mla_malloc(ctx, sizeof qo_indptr, &d_qo));
  CHECK(mla_malloc(ctx, sizeof kv_indptr, &d_kvp));
  CHECK(mla_malloc(ctx, pinfo.work_list_bytes, &d_work));
  CHECK(mla_malloc(ctx, sizeof(uint16_t) * T * H * Dv, &d_out));
  CHECK(mla_malloc(ctx, sizeof(float) * T * H, &d_lse));
  CHECK(mla_malloc(ctx, pinfo.workspace_bytes, &d_ws));
  CHECK(mla_copy_to_device(ctx, d_q, q, sizeof *q * T * H * D));
  CHECK(mla_copy_to_device(ctx, d_kv, kv, (size_t)N * D));
  CHECK(mla_copy_to_device(ctx, d_scale, &scale, sizeof scale));
  CHECK(mla_copy_to_device(ctx, d_qo, qo_indptr, sizeof qo_indptr));
  CHECK(mla_copy_to_device(ctx, d_kvp, kv_indptr, sizeof kv_indptr));
  CHECK(mla_copy_to_device(ctx, d_work, work_list_host, pinfo.work_list_bytes));

  mla_decode_args args = {0};
  args.q = d_q;
  args.kv = d_kv;
  args.kv_scale = d_scale;
  args.qo_indptr = d_qo;
  args.kv_indptr = d_kvp;
  args.work_list = d_work;
  args.out = d_out;
  args.lse = d_lse;
  args.workspace = d_ws;
  args.workspace_bytes = pinfo.workspace_bytes;
  args.num_seqs = B;
  args.num_tokens = T;
  args.num_kv_rows = N;
  CHECK(mla_launch(kernel, plan, &args, NULL));
  CHECK(mla_synchronize(ctx, NULL));

  uint16_t *out = malloc(sizeof *out * T * H * Dv);
  float *lse = malloc(sizeof *lse * T * H);
  CHECK(mla_copy_to_host(ctx, out, d_out, sizeof *out * T * H * Dv));
  CHECK(mla_copy_to_host(ctx, lse, d_lse, sizeof *lse * T * H));

  /* float64 reference: causal over the newest positions for q_len > 1. */
  double err2 = 0, ref2 = 0, lse_err = 0;
  double *s = malloc(sizeof *s * N), *o = malloc(sizeof *o * Dv);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < q_len[b]; ++i)
      for (int h = 0; h < H; ++h) {
        int t = qo_indptr[b] + i, L = kv_len[b] - (q_len[b] - 1 - i);
        const uint16_t *qr = q + ((size_t)t * H + h) * D;
        double m = -INFINITY, sum = 0;
        for (int p = 0; p < L; ++p) {
          const uint8_t *k = kv + (size_t)(kv_indptr[b] + p) * D;
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += from_bf16(qr[d]) * from_e4m3(k[d]) * scale;
          s[p] = dot * info.sm_scale;
          if (s[p] > m)
            m = s[p];
        }
        memset(o, 0, sizeof *o * Dv);
        for (int p = 0; p < L; ++p) {
          double w = exp(s[p] - m);
          const uint8_t *v = kv + (size_t)(kv_indptr[b] + p) * D;
          sum += w;
          for (int d = 0; d < Dv; ++d)
            o[d] += w * from_e4m3(v[d]) * scale;
        }
        for (int d = 0; d < Dv; ++d) {
          double ref = o[d] / sum, got = from_bf16(out[((size_t)t * H + h) * Dv + d]);
          err2 += (got - ref) * (got - ref);
          ref2 += ref * ref;
        }
        double ref_lse = m + log(sum);
        double e = fabs(lse[t * H + h] - ref_lse) / (1e-4 + 1e-6 * fabs(ref_lse));
        if (!(e <= lse_err)) /* NaN-safe max */
          lse_err = e;
      }
  double rel_err = sqrt(err2 / ref2);
  printf("rel_err=%.3e lse_err/tolerance=%.3f\n", rel_err, lse_err);
  int pass = rel_err <= 5e-3 && lse_err <= 1.0;
  printf("%s\n", pass ? "PASS" : "FAIL");

  mla_free(ctx, d_q);
  mla_free(ctx, d_kv);
  mla_free(ctx, d_scale);
  mla_free(ctx, d_qo);
  mla_free(ctx, d_kvp);
  mla_free(ctx, d_work);
  mla_free(ctx, d_out);
  mla_free(ctx, d_lse);
  mla_free(ctx, d_ws);
  mla_plan_destroy(plan);
  mla_kernel_destroy(kernel);
  mla_context_destroy(ctx);
  free(q); free(kv); free(work_list_host); free(out); free(lse); free(s); free(o);
  return pass ? 0 : 2;
}
