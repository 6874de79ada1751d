//===- MemRefDescriptor.h - memref descriptors for JIT'd code ---*- C++ -*-===//
//
// The C-interface memref descriptor (as MLIR's StridedMemRefType lays it out,
// with the element type erased) for handing host buffers to compiled code.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_MEMREFDESCRIPTOR_H
#define MLA_JIT_MEMREFDESCRIPTOR_H

#include <array>
#include <cstdint>

namespace mla {

template <int Rank> struct MemRefDescriptor {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

/// A row-major descriptor of `data` with `shape`.
template <int Rank>
MemRefDescriptor<Rank> describe(const void *data,
                                std::array<int64_t, Rank> shape) {
  MemRefDescriptor<Rank> d;
  d.allocated = d.aligned = const_cast<void *>(data);
  d.offset = 0;
  int64_t stride = 1;
  for (int i = Rank - 1; i >= 0; --i) {
    d.sizes[i] = shape[i];
    d.strides[i] = stride;
    stride *= shape[i];
  }
  return d;
}

} // namespace mla

#endif // MLA_JIT_MEMREFDESCRIPTOR_H
