// The registered host pipeline takes a destination-passing mla.decode wrapper
// all the way to the LLVM dialect: nothing else remains, the C interface
// wrapper exists, and the per-sequence temporaries are freed.
// RUN: mla-opt %s --mla-decode-to-cpu | FileCheck %s
// RUN: mla-opt %s --mla-decode-to-cpu | FileCheck %s --check-prefix=ONLY-LLVM

// CHECK-LABEL: llvm.func @mla_decode(
// CHECK: llvm.call @malloc
// CHECK: llvm.intr.exp
// CHECK: llvm.call @free
// CHECK-LABEL: llvm.func @_mlir_ciface_mla_decode(
// ONLY-LLVM-NOT: {{^ *(%[^ ]+ = )?(arith|memref|scf|cf|linalg|tensor|bufferization|math|func|mla)\.}}

func.func @mla_decode(%q: memref<?x16x576xbf16>, %kv: memref<?x576xf8E4M3FN>,
                      %qo: memref<?xi32>, %kvp: memref<?xi32>, %s: memref<1xf32>,
                      %out: memref<?x16x512xbf16>, %lse: memref<?x16xf32>)
    attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<?x16x576xbf16> to tensor<?x16x576xbf16>
  %kvt = bufferization.to_tensor %kv restrict : memref<?x576xf8E4M3FN> to tensor<?x576xf8E4M3FN>
  %qot = bufferization.to_tensor %qo restrict : memref<?xi32> to tensor<?xi32>
  %kvpt = bufferization.to_tensor %kvp restrict : memref<?xi32> to tensor<?xi32>
  %st = bufferization.to_tensor %s restrict : memref<1xf32> to tensor<1xf32>
  %o, %l = mla.decode q(%qt : tensor<?x16x576xbf16>) kv(%kvt : tensor<?x576xf8E4M3FN>)
             scale(%st : tensor<1xf32>)
             indptr(%qot, %kvpt : tensor<?xi32>, tensor<?xi32>)
             {kv_format = #mla.kv_format<fp8>}
             -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  bufferization.materialize_in_destination %o in restrict writable %out
      : (tensor<?x16x512xbf16>, memref<?x16x512xbf16>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse
      : (tensor<?x16xf32>, memref<?x16xf32>) -> ()
  return
}
