"""The C API of libMLARuntime (runtime/include/mla/runtime.h) through ctypes.

Only what the H200 benchmark needs: a cuda context, artifacts, host plans and
launches on torch's current stream. Every call's status is checked; a
failure raises with mla_last_error()'s message.
"""
import ctypes as C

BACKEND_CUDA = 3
FORMATS = {0: "bf16", 1: "fp8", 2: "mxfp4"}


class PlanInfo(C.Structure):
    _fields_ = [("num_seqs", C.c_int32), ("num_tokens", C.c_int32),
                ("num_kv_rows", C.c_int32), ("num_work_items", C.c_int32),
                ("work_list_bytes", C.c_size_t),
                ("workspace_bytes", C.c_size_t),
                ("device_plan", C.c_int32), ("status_offset", C.c_size_t)]


class KernelInfo(C.Structure):
    _fields_ = [("kv_format", C.c_int), ("num_heads", C.c_int32),
                ("qk_dim", C.c_int32), ("v_dim", C.c_int32),
                ("sm_scale", C.c_float),
                ("max_query_tokens_per_seq", C.c_int32),
                ("target", C.c_char * 32), ("page_size", C.c_int32)]


class DecodeArgs(C.Structure):
    _fields_ = [("q", C.c_void_p), ("kv", C.c_void_p),
                ("kv_scale", C.c_void_p), ("qo_indptr", C.c_void_p),
                ("kv_indptr", C.c_void_p), ("work_list", C.c_void_p),
                ("out", C.c_void_p), ("lse", C.c_void_p),
                ("workspace", C.c_void_p), ("workspace_bytes", C.c_size_t),
                ("num_seqs", C.c_int32), ("num_tokens", C.c_int32),
                ("num_kv_rows", C.c_int32), ("kv_indices", C.c_void_p),
                ("kv_last_page_len", C.c_void_p)]


class Runtime:
    def __init__(self, path, device=0):
        self.lib = C.CDLL(path)
        self.lib.mla_last_error.restype = C.c_char_p
        self.ctx = C.c_void_p()
        self.check(self.lib.mla_context_create(BACKEND_CUDA, device,
                                               C.byref(self.ctx)),
                   "mla_context_create")

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: "
                               f"{self.lib.mla_last_error().decode()}")

    def load(self, path):
        kernel = C.c_void_p()
        self.check(self.lib.mla_kernel_load_file(self.ctx, path.encode(),
                                                 C.byref(kernel)),
                   f"loading {path}")
        info = KernelInfo()
        self.check(self.lib.mla_kernel_get_info(kernel, C.byref(info)),
                   "mla_kernel_get_info")
        return kernel, info

    def plan(self, kernel, qo_indptr, kv_indptr, last_page_len=None):
        """A host plan from host int32 lists; returns (plan, info, work list
        bytes)."""
        n = len(qo_indptr) - 1
        qo = (C.c_int32 * len(qo_indptr))(*qo_indptr)
        kv = (C.c_int32 * len(kv_indptr))(*kv_indptr)
        plan = C.c_void_p()
        if last_page_len is None:
            self.check(self.lib.mla_plan_create(kernel, n, qo, kv,
                                                C.byref(plan)),
                       "mla_plan_create")
        else:
            last = (C.c_int32 * n)(*last_page_len)
            self.check(self.lib.mla_plan_create_paged(kernel, n, qo, kv, last,
                                                      C.byref(plan)),
                       "mla_plan_create_paged")
        info = PlanInfo()
        self.check(self.lib.mla_plan_get_info(plan, C.byref(info)),
                   "mla_plan_get_info")
        work = (C.c_uint8 * info.work_list_bytes)()
        self.check(self.lib.mla_plan_get_work_list(plan, work,
                                                   info.work_list_bytes),
                   "mla_plan_get_work_list")
        return plan, info, bytes(work)

    def device_plan(self, kernel, max_seqs, max_tokens, max_kv):
        """A device plan (planned on the GPU by every launch); returns (plan,
        info)."""
        plan = C.c_void_p()
        self.check(self.lib.mla_plan_create_device(kernel, max_seqs,
                                                   max_tokens, max_kv,
                                                   C.byref(plan)),
                   "mla_plan_create_device")
        info = PlanInfo()
        self.check(self.lib.mla_plan_get_info(plan, C.byref(info)),
                   "mla_plan_get_info")
        return plan, info

    def launch(self, kernel, plan, args, stream):
        self.check(self.lib.mla_launch(kernel, plan, C.byref(args),
                                       C.c_void_p(stream)), "mla_launch")

    def destroy_plan(self, plan):
        self.lib.mla_plan_destroy(plan)
