// Static token, row and batch counts keep their static result types through
// every lowering (a fixed bug: the lowerings built `?` token dimensions and
// the replaced op's static result type no longer matched).
// RUN: mla-opt %s --mla-decompose | FileCheck %s --check-prefix=DECOMPOSE
// RUN: mla-opt %s --mla-select-config="target=host splits=3" --mla-split-kv --mla-tile --mla-lower-combine | FileCheck %s --check-prefix=SPLIT
// RUN: mla-opt %s --mla-decode-to-cpu | FileCheck %s --check-prefix=LLVM
// RUN: mla-opt %s --mla-decode-split-to-cpu="target=host" | FileCheck %s --check-prefix=LLVM

// DECOMPOSE: scf.for {{.+}} -> (tensor<4x32x192xbf16>)
// DECOMPOSE: return %{{.+}} : tensor<4x32x192xbf16>
// SPLIT: scf.for {{.+}} -> (tensor<4x32x192xbf16>)
// SPLIT: return %{{.+}} : tensor<4x32x192xbf16>
// LLVM: llvm.func @static_mxfp4(

func.func @static_mxfp4(%q: tensor<4x32x256xbf16>, %kv: tensor<100x128xi8>,
                        %s: tensor<100x8xf8E8M0FNU>, %qo: tensor<3xi32>,
                        %kvp: tensor<3xi32>) -> tensor<4x32x192xbf16> {
  %o = mla.decode q(%q : tensor<4x32x256xbf16>) kv(%kv : tensor<100x128xi8>)
         scale(%s : tensor<100x8xf8E8M0FNU>)
         indptr(%qo, %kvp : tensor<3xi32>, tensor<3xi32>)
         {kv_format = #mla.kv_format<mxfp4>, v_head_dim = 192}
         -> tensor<4x32x192xbf16>
  return %o : tensor<4x32x192xbf16>
}
