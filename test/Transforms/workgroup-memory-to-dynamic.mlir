// RUN: mla-opt %s --split-input-file --mla-workgroup-memory-to-dynamic --verify-diagnostics | FileCheck %s

// A kernel's attributions become views of one dynamic block, in order, each
// at an offset aligned to its llvm.align (at least 16 bytes); the launch
// records the block's size. Non-kernel functions are left alone.
// CHECK-LABEL: gpu.func @k(
// CHECK-NOT: workgroup(
// CHECK-SAME: dynamic_lds_bytes = 66 : i64, {{.*}}lds_bytes = 66 : i64
// CHECK: %[[BASE:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[BASE]][%[[C0]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<3xf32, #gpu.address_space<workgroup>>
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: memref.view %[[BASE]][%[[C16]]][] : {{.*}} to memref<4x5xf16, #gpu.address_space<workgroup>>
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: memref.view %[[BASE]][%[[C64]]][] : {{.*}} to memref<2xi8, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @helper(
// CHECK-SAME: workgroup(
gpu.module @m {
  gpu.func @k(%out: memref<1xf32>)
      workgroup(%a : memref<3xf32, #gpu.address_space<workgroup>>,
                %b : memref<4x5xf16, #gpu.address_space<workgroup>>,
                %c : memref<2xi8, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
      kernel attributes {mla.launch = {arg_dims = [["1"]], args = ["out"], block = [256, 1, 1], grid = ["1", "1", "1"], lds_bytes = 66 : i64}} {
    %i = arith.constant 0 : index
    %x = memref.load %a[%i] : memref<3xf32, #gpu.address_space<workgroup>>
    memref.store %x, %out[%i] : memref<1xf32>
    gpu.return
  }
  gpu.func @helper() workgroup(%a : memref<3xf32, #gpu.address_space<workgroup>>) {
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{workgroup attribution 0 is not a static, contiguous memref}}
  gpu.func @k() workgroup(%a : memref<4xf32, strided<[2]>, #gpu.address_space<workgroup>>) kernel {
    gpu.return
  }
}
