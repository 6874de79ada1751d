//===- mla/runtime.hpp - a thin C++ wrapper of the C API --------*- C++ -*-===//
//
// RAII handles over runtime.h: failures throw mla::runtime::Error with the
// status and the message. Header-only; link the same library as the C API.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_HPP
#define MLA_RUNTIME_HPP

#include "mla/runtime.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mla::runtime {

class Error : public std::runtime_error {
public:
  Error(mla_status status, const std::string &message)
      : std::runtime_error(std::string(mla_status_name(status)) + ": " +
                           message),
        status_(status) {}
  mla_status status() const { return status_; }

private:
  mla_status status_;
};

inline void check(mla_status status) {
  if (status != MLA_SUCCESS)
    throw Error(status, mla_last_error());
}

/// Owns one C handle; moves, never copies.
template <typename Handle, mla_status (*Destroy)(Handle)> class Owned {
public:
  Owned() = default;
  explicit Owned(Handle handle) : handle_(handle) {}
  Owned(Owned &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Owned &operator=(Owned &&other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Owned(const Owned &) = delete;
  Owned &operator=(const Owned &) = delete;
  ~Owned() {
    if (handle_)
      Destroy(handle_);
  }
  Handle get() const { return handle_; }

private:
  Handle handle_ = nullptr;
};

class Context : public Owned<mla_context, mla_context_destroy> {
public:
  explicit Context(mla_backend backend, int device = 0)
      : Owned(create(backend, device)) {}
  std::string arch() const {
    const char *name = nullptr;
    check(mla_context_arch(get(), &name));
    return name;
  }
  void *allocate(size_t bytes) const {
    void *ptr = nullptr;
    check(mla_malloc(get(), bytes, &ptr));
    return ptr;
  }
  void release(void *ptr) const { check(mla_free(get(), ptr)); }
  void copyToDevice(void *dst, const void *src, size_t bytes) const {
    check(mla_copy_to_device(get(), dst, src, bytes));
  }
  void copyToHost(void *dst, const void *src, size_t bytes) const {
    check(mla_copy_to_host(get(), dst, src, bytes));
  }
  void synchronize(void *stream = nullptr) const {
    check(mla_synchronize(get(), stream));
  }

private:
  static mla_context create(mla_backend backend, int device) {
    mla_context context = nullptr;
    check(mla_context_create(backend, device, &context));
    return context;
  }
};

class Kernel : public Owned<mla_kernel, mla_kernel_destroy> {
public:
  static Kernel fromFile(const Context &context, const std::string &path) {
    mla_kernel kernel = nullptr;
    check(mla_kernel_load_file(context.get(), path.c_str(), &kernel));
    return Kernel(kernel);
  }
  static Kernel fromMemory(const Context &context, const void *data,
                           size_t bytes) {
    mla_kernel kernel = nullptr;
    check(mla_kernel_load_memory(context.get(), data, bytes, &kernel));
    return Kernel(kernel);
  }
  mla_kernel_info info() const {
    mla_kernel_info info;
    check(mla_kernel_get_info(get(), &info));
    return info;
  }

private:
  using Owned::Owned;
};

class Plan : public Owned<mla_plan, mla_plan_destroy> {
public:
  Plan(const Kernel &kernel, const std::vector<int32_t> &qoIndptr,
       const std::vector<int32_t> &kvIndptr)
      : Owned(create(kernel, qoIndptr, kvIndptr)) {}
  /// A paged kernel's plan: kvIndptr counts pages, kvLastPageLen [num_seqs]
  /// holds the rows of each sequence's last page.
  Plan(const Kernel &kernel, const std::vector<int32_t> &qoIndptr,
       const std::vector<int32_t> &kvIndptr,
       const std::vector<int32_t> &kvLastPageLen)
      : Owned(createPaged(kernel, qoIndptr, kvIndptr, kvLastPageLen)) {}
  /// A device plan (mla_plan_create_device): sized from maxima, planned
  /// on the device at every launch.
  static Plan device(const Kernel &kernel, int32_t maxSeqs, int32_t maxTokens,
                     int32_t maxKV) {
    mla_plan plan = nullptr;
    check(mla_plan_create_device(kernel.get(), maxSeqs, maxTokens, maxKV,
                                 &plan));
    return Plan(plan);
  }
  mla_plan_info info() const {
    mla_plan_info info;
    check(mla_plan_get_info(get(), &info));
    return info;
  }
  std::vector<uint8_t> workList() const {
    std::vector<uint8_t> bytes(info().work_list_bytes);
    check(mla_plan_get_work_list(get(), bytes.data(), bytes.size()));
    return bytes;
  }

private:
  explicit Plan(mla_plan plan) : Owned(plan) {}
  static mla_plan create(const Kernel &kernel,
                         const std::vector<int32_t> &qoIndptr,
                         const std::vector<int32_t> &kvIndptr) {
    if (qoIndptr.empty() || qoIndptr.size() != kvIndptr.size())
      throw Error(MLA_ERROR_INVALID_ARGUMENT,
                  "the indptrs must have num_seqs + 1 entries each");
    mla_plan plan = nullptr;
    check(mla_plan_create(kernel.get(),
                          static_cast<int32_t>(qoIndptr.size() - 1),
                          qoIndptr.data(), kvIndptr.data(), &plan));
    return plan;
  }
  static mla_plan createPaged(const Kernel &kernel,
                              const std::vector<int32_t> &qoIndptr,
                              const std::vector<int32_t> &kvIndptr,
                              const std::vector<int32_t> &kvLastPageLen) {
    if (qoIndptr.empty() || qoIndptr.size() != kvIndptr.size() ||
        kvLastPageLen.size() + 1 != qoIndptr.size())
      throw Error(MLA_ERROR_INVALID_ARGUMENT,
                  "the indptrs must have num_seqs + 1 entries each and "
                  "kv_last_page_len num_seqs");
    mla_plan plan = nullptr;
    check(mla_plan_create_paged(
        kernel.get(), static_cast<int32_t>(qoIndptr.size() - 1),
        qoIndptr.data(), kvIndptr.data(), kvLastPageLen.data(), &plan));
    return plan;
  }
};

inline void launch(const Kernel &kernel, const Plan &plan,
                   const mla_decode_args &args, void *stream = nullptr) {
  check(mla_launch(kernel.get(), plan.get(), &args, stream));
}

} // namespace mla::runtime

#endif // MLA_RUNTIME_HPP
