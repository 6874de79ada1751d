// RUN: mla-opt %s --mla-lower-math-to-nvvm | FileCheck %s

// The f32 math of the sm_90a kernels becomes the NVPTX approximations (no
// libdevice); other types are left alone.

// CHECK-LABEL: func.func @f32_math
// CHECK-DAG: %[[LN2:.*]] = arith.constant 0.693147182 : f32
// CHECK-DAG: %[[L2E:.*]] = arith.constant 1.44269502 : f32
func.func @f32_math(%x: f32, %y: f32, %z: f32) -> (f32, f32, f32, f32, f32) {
  // CHECK: %[[E2:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%arg0) : (f32) -> f32
  %0 = math.exp2 %x : f32
  // CHECK: %[[SX:.*]] = arith.mulf %arg0, %[[L2E]] : f32
  // CHECK: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[SX]]) : (f32) -> f32
  %1 = math.exp %x : f32
  // CHECK: %[[G2:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"(%arg1) : (f32) -> f32
  %2 = math.log2 %y : f32
  // CHECK: %[[G:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"(%arg1) : (f32) -> f32
  // CHECK: %[[LN:.*]] = arith.mulf %[[G]], %[[LN2]] : f32
  %3 = math.log %y : f32
  // CHECK: %[[P:.*]] = arith.mulf %arg0, %arg1 fastmath<contract> : f32
  // CHECK: %[[F:.*]] = arith.addf %[[P]], %arg2 fastmath<contract> : f32
  %4 = math.fma %x, %y, %z : f32
  // CHECK-NOT: math.
  // CHECK: return %[[E2]], %[[E]], %[[G2]], %[[LN]], %[[F]]
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f32
}

// CHECK-LABEL: func.func @other_types
func.func @other_types(%h: f16, %d: f64, %v: vector<4xf32>) -> (f16, f64, vector<4xf32>) {
  // CHECK: math.exp2 %{{.*}} : f16
  %0 = math.exp2 %h : f16
  // CHECK: math.log %{{.*}} : f64
  %1 = math.log %d : f64
  // CHECK: math.exp %{{.*}} : vector<4xf32>
  %2 = math.exp %v : vector<4xf32>
  // CHECK-NOT: llvm.call_intrinsic
  return %0, %1, %2 : f16, f64, vector<4xf32>
}
