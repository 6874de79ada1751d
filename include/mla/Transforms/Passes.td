//===- Passes.td - mla pass definitions --------------------*- tablegen -*-===//
//
// Every pass of the mla pipelines, declared once; `mla-opt --help` lists them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TRANSFORMS_PASSES_TD
#define MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MLADecomposePass : Pass<"mla-decompose"> {
  let summary = "Rewrite mla.decode into upstream linalg/tensor/scf/arith/math ops";
  let description = [{
    The reference lowering of `mla.decode` (used by the `cpu` backend): a loop
    over sequences that, for each one, slices its query tokens and cache rows
    out of the indptr ranges, dequantizes the rows to f32 (fp8: value * scale;
    mxfp4: e2m1 * 2^(e8m0 - 127), both through exact lookup tables), computes
    the scaled scores Q·Kᵀ over all Dqk columns, applies the causal rule for
    1..4 query tokens, a max-subtracted softmax, P·V over the first Dv
    columns, and writes the bf16 output and the optional lse. Tokens that see
    no cache position get zeros and lse = -inf (no 0/0).

    Before:

    ```mlir
    %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
           indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
           {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
    ```

    After (abridged):

    ```mlir
    %r:2 = scf.for %b = %c0 to %B step %c1 iter_args(%o = %zeros, %l = %ninf) {
      %qs = tensor.extract_slice %q[%q0, 0, 0] [%qlen, 16, 576] [1, 1, 1]
      %k  = linalg.generic ... // dequantize rows [%k0, %k1) to f32
      %s  = linalg.generic ... // scores, reduction over Dqk
      ...                      // mask, max, exp, sum, P·V, normalize
      %o2 = tensor.insert_slice %tile into %o[%q0, 0, 0] ...
      scf.yield %o2, %l2
    }
    ```

    No mla op remains afterwards.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

#endif // MLA_TRANSFORMS_PASSES_TD
