// The registered split pipeline (config, split-KV, KV tiles, combine) takes
// the same wrapper to the LLVM dialect; the work list comes from a call of the
// runtime planner through its C interface.
// RUN: mla-opt %s --mla-decode-split-to-cpu="splits=4 kv-tile=32" | FileCheck %s
// RUN: mla-opt %s --mla-decode-split-to-cpu | FileCheck %s --check-prefix=ONLY-LLVM

// CHECK: llvm.func private @mla_plan_splits(
// CHECK: llvm.call @_mlir_ciface_mla_plan_splits(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64) -> i64
// CHECK: llvm.func @_mlir_ciface_mla_plan_splits(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64) -> i64
// CHECK-LABEL: llvm.func @mla_decode(
// The planner gets 256 CUs, the 32-row tile and 4 uniform splits.
// CHECK-DAG: llvm.mlir.constant(256 : i64) : i64
// CHECK-DAG: llvm.mlir.constant(32 : i64) : i64
// CHECK-DAG: llvm.mlir.constant(4 : i64) : i64
// CHECK: llvm.call @mla_plan_splits(
// CHECK: llvm.intr.exp
// CHECK: llvm.intr.log
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
