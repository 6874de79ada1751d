//===- _runtime.cpp - the runtime's C API for Python ----------------------===//
//
// A thin layer over <mla/runtime.h>: contexts, kernels and plans as Python
// objects, and launches whose buffers come in through DLPack (`__dlpack__`),
// so NumPy arrays (emu, cpu) and PyTorch tensors pass without copies. Every
// argument is checked here — object kind, device, dtype, shape, strides —
// and a bad one raises TypeError or ValueError with the argument's name;
// the runtime's own failures raise the exception their status stands for.
// Nothing here allocates device memory or synchronizes: a launch is queued
// on the caller's stream as the C API's is.
//
//===----------------------------------------------------------------------===//

#include "mla/runtime.h"

#include "mla/ABI.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

//===----------------------------------------------------------------------===//
// DLPack, as far as it is read here (dlpack.h 0.8: the "dltensor" capsule
// NumPy >= 1.22 and PyTorch hand out)
//===----------------------------------------------------------------------===//

struct DLDevice {
  int32_t deviceType;
  int32_t deviceId;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; // in elements; null: row-major
  uint64_t byteOffset;
};
struct DLManagedTensor {
  DLTensor tensor;
  void *managerContext;
  void (*deleter)(DLManagedTensor *);
};
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLROCM = 10 };
enum DLTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

/// The element types a buffer may have, by what it holds.
enum class Elem { BF16, F32, I32, Byte };

bool matches(DLDataType t, Elem e) {
  if (t.lanes != 1)
    return false;
  switch (e) {
  case Elem::BF16: // bf16 bits: NumPy has no bfloat16, so uint16 too
    return t.bits == 16 && (t.code == kDLBfloat || t.code == kDLUInt);
  case Elem::F32:
    return t.bits == 32 && t.code == kDLFloat;
  case Elem::I32:
    return t.bits == 32 && t.code == kDLInt;
  case Elem::Byte: // codes of a quantized format, or raw bytes
    return t.bits == 8 && (t.code == kDLUInt || t.code == kDLInt);
  }
  return false;
}

const char *elemName(Elem e) {
  switch (e) {
  case Elem::BF16:
    return "bfloat16 (or uint16 holding bf16 bits)";
  case Elem::F32:
    return "float32";
  case Elem::I32:
    return "int32";
  case Elem::Byte:
    return "uint8";
  }
  return "?";
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") +
         (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

/// A borrowed view of an array through DLPack, released when it ends.
class DLView {
public:
  DLView(py::handle object, const std::string &name, int32_t deviceType)
      : name(name) {
    if (object.is_none() || !py::hasattr(object, "__dlpack__"))
      throw py::type_error(name + ": expected an array with __dlpack__ "
                                  "(a NumPy array or a PyTorch tensor), got " +
                           std::string(py::str(py::type::of(object))));
    py::object capsule;
    try {
      capsule = object.attr("__dlpack__")();
    } catch (py::error_already_set &e) {
      // NumPy refuses to export read-only arrays, for one.
      throw py::type_error(name + ": cannot be exported through DLPack: " +
                           std::string(e.what()));
    }
    managed = static_cast<DLManagedTensor *>(
        PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!managed)
      throw py::type_error(name + ": __dlpack__ did not return a DLPack "
                                  "capsule");
    // Consumed: the capsule no longer frees it; ~DLView does.
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    const DLTensor &t = managed->tensor;
    if (t.device.deviceType != deviceType)
      throw py::value_error(
          name + ": the array is on DLPack device type " +
          std::to_string(t.device.deviceType) + ", the context's backend " +
          "needs " + std::to_string(deviceType) +
          (deviceType == kDLCPU ? " (host memory: NumPy, or a CPU tensor)"
                                : " (GPU memory)"));
  }
  ~DLView() {
    if (managed && managed->deleter)
      managed->deleter(managed);
  }
  DLView(const DLView &) = delete;
  DLView &operator=(const DLView &) = delete;

  const DLTensor &tensor() const { return managed->tensor; }
  int64_t dim(int i) const { return tensor().shape[i]; }
  void *data() const {
    return static_cast<char *>(tensor().data) + tensor().byteOffset;
  }

  /// Checks the element type, the shape (-1: any size) and that the
  /// elements are dense in row-major order.
  void expect(Elem elem, const std::vector<int64_t> &shape) const {
    const DLTensor &t = tensor();
    if (!matches(t.dtype, elem))
      throw py::type_error(name + ": expected " + elemName(elem) +
                           " elements, got DLPack type code " +
                           std::to_string(t.dtype.code) + " with " +
                           std::to_string(t.dtype.bits) + " bits");
    std::vector<int64_t> actual(t.shape, t.shape + t.ndim);
    bool ok = actual.size() == shape.size();
    for (size_t i = 0; ok && i < shape.size(); ++i)
      ok = shape[i] < 0 || shape[i] == actual[i];
    if (!ok)
      throw py::value_error(name + ": expected shape " + shapeText(shape) +
                            ", got " + shapeText(actual));
    if (t.strides) {
      int64_t stride = 1;
      for (int i = t.ndim - 1; i >= 0; --i) {
        if (t.shape[i] != 1 && t.strides[i] != stride)
          throw py::value_error(name + ": must be contiguous (row-major)");
        stride *= t.shape[i];
      }
    }
  }
  /// At least `bytes` bytes of one-byte elements (work list, workspace).
  void expectBytes(size_t bytes) const {
    const DLTensor &t = tensor();
    if (t.dtype.lanes != 1 || t.dtype.bits % 8 != 0)
      throw py::type_error(name + ": expected a byte buffer");
    size_t size = t.dtype.bits / 8;
    for (int i = 0; i < t.ndim; ++i)
      size *= static_cast<size_t>(t.shape[i]);
    if (size < bytes)
      throw py::value_error(name + ": has " + std::to_string(size) +
                            " bytes; the plan needs " + std::to_string(bytes));
    expect(Elem::Byte, std::vector<int64_t>(t.ndim, -1));
  }

private:
  std::string name;
  DLManagedTensor *managed = nullptr;
};

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Raises the exception `status` stands for, with the runtime's message.
void check(mla_status status, const char *what) {
  if (status == MLA_SUCCESS)
    return;
  std::string message = std::string(what) + ": " + mla_status_name(status) +
                        ": " + mla_last_error();
  switch (status) {
  case MLA_ERROR_INVALID_ARGUMENT:
  case MLA_ERROR_SIZE_MISMATCH:
  case MLA_ERROR_WORKSPACE_TOO_SMALL:
  case MLA_ERROR_INVALID_ARTIFACT:
  case MLA_ERROR_VERSION_MISMATCH:
  case MLA_ERROR_TARGET_MISMATCH:
    throw py::value_error(message);
  case MLA_ERROR_IO:
    PyErr_SetString(PyExc_OSError, message.c_str());
    throw py::error_already_set();
  default: // backend unavailable, launch failed, internal
    throw std::runtime_error(message);
  }
}

//===----------------------------------------------------------------------===//
// Contexts, kernels, plans
//===----------------------------------------------------------------------===//

struct Context {
  mla_context handle = nullptr;
  mla_backend backend;
  int32_t deviceType;
  ~Context() {
    if (handle)
      mla_context_destroy(handle);
  }
};

struct Kernel {
  std::shared_ptr<Context> context;
  mla_kernel handle = nullptr;
  mla_kernel_info info{};
  ~Kernel() {
    if (handle)
      mla_kernel_destroy(handle);
  }
};

struct Plan {
  std::shared_ptr<Kernel> kernel;
  mla_plan handle = nullptr;
  mla_plan_info info{};
  ~Plan() {
    if (handle)
      mla_plan_destroy(handle);
  }
};

std::shared_ptr<Context> openContext(const std::string &backend, int device) {
  auto c = std::make_shared<Context>();
  if (backend == "emu" || backend == "cpu") {
    c->backend = backend == "emu" ? MLA_BACKEND_EMU : MLA_BACKEND_CPU;
    c->deviceType = kDLCPU;
  } else if (backend == "hip") {
    c->backend = MLA_BACKEND_HIP;
    c->deviceType = kDLROCM;
  } else if (backend == "cuda") {
    c->backend = MLA_BACKEND_CUDA;
    c->deviceType = kDLCUDA;
  } else {
    throw py::value_error("unknown backend '" + backend +
                          "' (emu, cpu, hip or cuda)");
  }
  check(mla_context_create(c->backend, device, &c->handle),
        "creating the context");
  return c;
}

std::shared_ptr<Kernel> finishLoad(std::shared_ptr<Context> c,
                                   std::shared_ptr<Kernel> k) {
  k->context = std::move(c);
  check(mla_kernel_get_info(k->handle, &k->info), "reading the kernel");
  return k;
}

std::vector<int32_t> hostIndptr(py::handle object, const char *name) {
  // A DLPack array in host memory, or any sequence of integers.
  if (py::hasattr(object, "__dlpack__")) {
    DLView view(object, name, kDLCPU);
    view.expect(Elem::I32, {-1});
    const auto *data = static_cast<const int32_t *>(view.data());
    return std::vector<int32_t>(data, data + view.dim(0));
  }
  try {
    return object.cast<std::vector<int32_t>>();
  } catch (py::cast_error &) {
    throw py::type_error(std::string(name) +
                         ": expected int32 indices (an array or a sequence)");
  }
}

std::shared_ptr<Plan> makePlan(std::shared_ptr<Kernel> k, py::handle qoIndptr,
                               py::handle kvIndptr) {
  std::vector<int32_t> qo = hostIndptr(qoIndptr, "qo_indptr");
  std::vector<int32_t> kv = hostIndptr(kvIndptr, "kv_indptr");
  if (qo.empty() || qo.size() != kv.size())
    throw py::value_error("qo_indptr and kv_indptr need the same length "
                          "B + 1 >= 1, got " + std::to_string(qo.size()) +
                          " and " + std::to_string(kv.size()));
  auto p = std::make_shared<Plan>();
  p->kernel = std::move(k);
  check(mla_plan_create(p->kernel->handle, static_cast<int32_t>(qo.size() - 1),
                        qo.data(), kv.data(), &p->handle),
        "planning");
  check(mla_plan_get_info(p->handle, &p->info), "planning");
  return p;
}

void writeWorkList(const Plan &p, py::handle buffer) {
  DLView view(buffer, "work_list", kDLCPU);
  view.expectBytes(p.info.work_list_bytes);
  check(mla_plan_get_work_list(p.handle, view.data(), p.info.work_list_bytes),
        "writing the work list");
}

/// One decode on the caller's buffers, queued on `stream` (an integer
/// handle, 0 or None: the default stream).
void launch(const Kernel &k, const Plan &p, py::handle q, py::handle kv,
            py::handle kvScale, py::handle qoIndptr, py::handle kvIndptr,
            py::handle out, py::handle lse, py::handle workList,
            py::handle workspace, py::object stream) {
  if (p.kernel.get() != &k)
    throw py::value_error("the plan was made for another kernel");
  int32_t device = k.context->deviceType;
  const mla_kernel_info &info = k.info;
  int64_t H = info.num_heads, D = info.qk_dim, Dv = info.v_dim;
  int64_t T = p.info.num_tokens, B = p.info.num_seqs;

  DLView qv(q, "q", device), kvv(kv, "kv", device);
  DLView qov(qoIndptr, "qo_indptr", device), kvpv(kvIndptr, "kv_indptr", device);
  DLView outv(out, "out", device), lsev(lse, "lse", device);
  qv.expect(Elem::BF16, {T, H, D});
  switch (info.kv_format) {
  case MLA_KV_BF16:
    kvv.expect(Elem::BF16, {-1, D});
    break;
  case MLA_KV_FP8:
    kvv.expect(Elem::Byte, {-1, D});
    break;
  case MLA_KV_MXFP4:
    kvv.expect(Elem::Byte, {-1, D / 2});
    break;
  }
  int64_t N = kvv.dim(0);
  qov.expect(Elem::I32, {B + 1});
  kvpv.expect(Elem::I32, {B + 1});
  outv.expect(Elem::BF16, {T, H, Dv});
  lsev.expect(Elem::F32, {T, H});
  std::optional<DLView> scalev;
  if (info.kv_format == MLA_KV_BF16) {
    if (!kvScale.is_none())
      throw py::value_error("kv_scale: a bf16 cache has no scale; pass None");
  } else {
    scalev.emplace(kvScale, "kv_scale", device);
    if (info.kv_format == MLA_KV_FP8)
      scalev->expect(Elem::F32, {1});
    else
      scalev->expect(Elem::Byte, {N, D / 32});
  }
  std::optional<DLView> workv, spacev;
  if (k.context->backend != MLA_BACKEND_CPU || !workList.is_none()) {
    workv.emplace(workList, "work_list", device);
    workv->expectBytes(p.info.work_list_bytes);
  }
  if (k.context->backend != MLA_BACKEND_CPU || !workspace.is_none()) {
    spacev.emplace(workspace, "workspace", device);
    spacev->expectBytes(p.info.workspace_bytes);
  }

  mla_decode_args args{};
  args.q = qv.data();
  args.kv = kvv.data();
  args.kv_scale = scalev ? scalev->data() : nullptr;
  args.qo_indptr = static_cast<const int32_t *>(qov.data());
  args.kv_indptr = static_cast<const int32_t *>(kvpv.data());
  args.work_list = workv ? workv->data() : nullptr;
  args.out = outv.data();
  args.lse = static_cast<float *>(lsev.data());
  args.workspace = spacev ? spacev->data() : nullptr;
  args.workspace_bytes = p.info.workspace_bytes;
  args.num_seqs = static_cast<int32_t>(B);
  args.num_tokens = static_cast<int32_t>(T);
  args.num_kv_rows = static_cast<int32_t>(N);
  void *streamHandle =
      stream.is_none() ? nullptr
                       : reinterpret_cast<void *>(stream.cast<uintptr_t>());
  mla_status status;
  {
    // The emu and cpu backends run the launch to completion: let other
    // Python threads go on meanwhile.
    py::gil_scoped_release release;
    status = mla_launch(k.handle, p.handle, &args, streamHandle);
  }
  check(status, "launching");
}

} // namespace

PYBIND11_MODULE(_runtime, m) {
  m.doc() = "The mla.decode runtime (<mla/runtime.h>) for Python.";

  py::class_<Context, std::shared_ptr<Context>>(m, "Context")
      .def(py::init(&openContext), py::arg("backend"), py::arg("device") = 0,
           "Opens a context on a backend: 'emu' (the gfx950 kernels on the "
           "CPU), 'cpu' (the reference lowering) or 'hip' (an AMD GPU).")
      .def_property_readonly("arch",
                             [](const Context &c) {
                               const char *arch = nullptr;
                               check(mla_context_arch(c.handle, &arch), "arch");
                               return std::string(arch);
                             })
      .def(
          "load",
          [](std::shared_ptr<Context> c, const std::string &path) {
            auto k = std::make_shared<Kernel>();
            check(mla_kernel_load_file(c->handle, path.c_str(), &k->handle),
                  "loading the artifact");
            return finishLoad(std::move(c), std::move(k));
          },
          py::arg("path"), "Loads an artifact file (mla-compile's .mla).")
      .def(
          "load_bytes",
          [](std::shared_ptr<Context> c, py::bytes bytes) {
            std::string data = bytes;
            auto k = std::make_shared<Kernel>();
            check(mla_kernel_load_memory(c->handle, data.data(), data.size(),
                                         &k->handle),
                  "loading the artifact");
            return finishLoad(std::move(c), std::move(k));
          },
          py::arg("data"), "Loads an artifact from its bytes.")
      .def(
          "check_hazards",
          [](const Context &c, bool enable) {
            check(mla_emu_check_hazards(c.handle, enable),
                  "configuring the emu");
          },
          py::arg("enable"), "emu: check LDS hazards (on by default).");

  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
      .def_property_readonly(
          "info",
          [](const Kernel &k) {
            py::dict d;
            d["kv_format"] = mla::formatName(
                static_cast<mla::CacheFormat>(k.info.kv_format));
            d["num_heads"] = k.info.num_heads;
            d["qk_dim"] = k.info.qk_dim;
            d["v_dim"] = k.info.v_dim;
            d["sm_scale"] = k.info.sm_scale;
            d["max_query_tokens_per_seq"] = k.info.max_query_tokens_per_seq;
            d["target"] = std::string(k.info.target);
            return d;
          })
      .def_property_readonly("backend",
                             [](const Kernel &k) {
                               return k.context->backend == MLA_BACKEND_EMU ? "emu"
                                      : k.context->backend == MLA_BACKEND_CPU
                                          ? "cpu"
                                          : "hip";
                             })
      .def("plan", &makePlan, py::arg("qo_indptr"), py::arg("kv_indptr"),
           "Plans the split-KV work list of one batch from host indptrs.")
      .def("launch", &launch, py::arg("plan"), py::kw_only(), py::arg("q"),
           py::arg("kv"), py::arg("kv_scale"), py::arg("qo_indptr"),
           py::arg("kv_indptr"), py::arg("out"), py::arg("lse"),
           py::arg("work_list"), py::arg("workspace"),
           py::arg("stream") = py::none(),
           "Queues one decode on the caller's buffers (DLPack arrays).");

  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan")
      .def_property_readonly("info",
                             [](const Plan &p) {
                               py::dict d;
                               d["num_seqs"] = p.info.num_seqs;
                               d["num_tokens"] = p.info.num_tokens;
                               d["num_kv_rows"] = p.info.num_kv_rows;
                               d["num_work_items"] = p.info.num_work_items;
                               d["work_list_bytes"] = p.info.work_list_bytes;
                               d["workspace_bytes"] = p.info.workspace_bytes;
                               return d;
                             })
      .def("write_work_list", &writeWorkList, py::arg("buffer"),
           "Writes the work list into a host byte buffer.");
}
