// mla-to-gpu: the split-level ops get a partial and a combine kernel in a
// gpu.module for the target chip, and the device planner a plan kernel;
// the host ops point at theirs.
// RUN: mla-opt %s --mla-select-config --mla-split-kv --mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-select-config --mla-split-kv --mla-to-gpu | FileCheck %s --check-prefix=TAIL

// CHECK: module attributes {gpu.container_module}
// CHECK: mla.partial_decode {{.+}} mla.kernel = @mla_kernels::@mla_partial_decode
// CHECK: mla.combine {{.+}} {mla.kernel = @mla_kernels::@mla_combine}
// CHECK: gpu.module @mla_kernels [#rocdl.target<O = 3, chip = "gfx950">]
// CHECK: gpu.func @mla_partial_decode(%[[Q:[^ ,)]+]]: memref<?x16x576xbf16>, %[[KV:[^ ,)]+]]: memref<?x576xf8E4M3FN, #gpu.address_space<global>>,
// CHECK-SAME: %[[UNITS:[^ ,)]+]]: memref<?x3xi32>, %[[WGUNITS:[^ ,)]+]]: memref<257xi32>)
// CHECK-SAME: workgroup(%[[KVLDS:[^ ,)]+]] : memref<2x64x576xf8E4M3FN, #gpu.address_space<workgroup>>, %[[PLDS:[^ ,)]+]] : memref<1x2x16x64xf8E4M3FN, #gpu.address_space<workgroup>>, %{{.+}} : memref<4x16xf32, #gpu.address_space<workgroup>>, %{{.+}} : memref<1x16x4xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-SAME: mla.launch = {arg_dims = {{\[}}["num_tokens", "16", "576"], ["num_kv_rows", "576"], ["1"], ["num_seqs+1"], ["num_seqs+1"], ["num_work_items", "4"], ["num_work_items", "4", "16", "512"], ["num_work_items", "4", "16"], ["num_seqs+1"], ["num_tokens", "16", "512"], ["num_tokens", "16"], ["num_work_units", "3"], ["257"]], args = ["q", "kv", "kv_scale", "qo_indptr", "kv_indptr", "work_items", "partial_out", "partial_lse", "item_indptr", "out", "lse", "work_units", "workgroup_unit_indptr"], block = [256, 1, 1], grid = ["256", "1", "1"], heads_per_block = 16 : i64, lds_bytes = 76288 : i64, rows_per_workgroup = 16 : i64}
// CHECK-SAME: rocdl.flat_work_group_size = "256,256"
// CHECK-SAME: rocdl.waves_per_eu = 1 : i32
// The persistent grid, 256 workgroups: workgroup id -> logical workgroup
// (the 32 dispatch slots of XCD id % 8 are logical workgroups 32·xcd..,
// so the consecutive units of a work item's row blocks share an XCD's L2),
// which runs its units [workgroup_unit_indptr[j], [j+1]), each a (work
// item, row block).
// CHECK: %[[WAVE:[^ ,)]+]] = arith.divui %thread_id_x, %c64
// The same wave from the first lane, a scalar for the wave-uniform indices.
// CHECK: %[[WAVE32:[^ ,)]+]] = rocdl.readfirstlane
// CHECK: %[[UWAVE:[^ ,)]+]] = arith.index_castui %[[WAVE32]]
// CHECK: %[[ID:[^ ,)]+]] = gpu.block_id x
// CHECK: %[[XCD:[^ ,)]+]] = arith.remui %[[ID]], %c8
// CHECK: %[[DSLOT:[^ ,)]+]] = arith.divui %[[ID]], %c8
// CHECK: %[[BASE:[^ ,)]+]] = arith.muli %[[XCD]], %c32
// CHECK: %[[LOGICAL:[^ ,)]+]] = arith.addi %[[BASE]], %[[DSLOT]]
// CHECK: memref.load %[[WGUNITS]][%[[LOGICAL]]]
// CHECK: scf.for %[[UNIT:[^ ,)]+]] = %{{.+}} to %{{.+}} step %c1 {
// CHECK:   %[[ITEM32:[^ ,)]+]] = memref.load %[[UNITS]][%[[UNIT]], %c0]
// CHECK:   %[[BLOCK32:[^ ,)]+]] = memref.load %[[UNITS]][%[[UNIT]], %c1]
// A wave's group and share: wave / 4 (the row group), wave % 4 (the part);
// it scores tile rows 16·part.. and sums Dv columns 128·part...
// CHECK: %[[ROWGROUP:[^ ,)]+]] = arith.divui %[[UWAVE]], %c4
// CHECK: %[[PART:[^ ,)]+]] = arith.remui %[[UWAVE]], %c4
// CHECK: %[[KVBASE:[^ ,)]+]] = arith.muli %[[PART]], %c16
// CHECK: %[[VBASE:[^ ,)]+]] = arith.muli %[[PART]], %c128
// The first tile is DMA'd before the loop (9 gathers of 16 bytes per lane)
// from the tile's rows as a buffer: based at its first row, valid for the
// item's rows from there (the rest read as zeros), so a lane's offset is
// the same every tile.
// The bound counts at most the tile's 64 rows (the resource's is 32 bits),
// read back from the first lane (it is uniform; the descriptor stays in
// scalar registers).
// CHECK: %[[TILEROWS:[^ ,)]+]] = memref.reinterpret_cast %[[KV]] to offset: [%{{.+}}], sizes: [36864], strides: [1]
// CHECK: %[[LEFT:[^ ,)]+]] = arith.minsi %{{.+}}, %c63_i32
// CHECK: %[[ROWS:[^ ,)]+]] = arith.addi %[[LEFT]], %c1_i32
// CHECK: %[[BYTES:[^ ,)]+]] = arith.muli %[[ROWS]], %c576_i32
// CHECK: %[[UBYTES:[^ ,)]+]] = rocdl.readfirstlane %[[BYTES]] : i32
// CHECK: %[[VALID:[^ ,)]+]] = arith.extui %[[UBYTES]] : i32 to i64
// CHECK: %[[TILEBUF:[^ ,)]+]] = amdgpu.fat_raw_buffer_cast %[[TILEROWS]] validBytes(%[[VALID]]) resetOffset
// CHECK-COUNT-9: amdgpu.gather_to_lds %[[TILEBUF]][%{{.+}}], %[[KVLDS]][%c0
// The tile loop counts positions in i32 (its bound tested by the scalar
// unit).
// CHECK: scf.for %[[T:[^ ,)]+]] = %{{.+}} to %{{.+}} step %c64_i32{{[_0-9]*}} iter_args(%[[M:[^ ,)]+]] = %{{.+}}, %[[L:[^ ,)]+]] = %{{.+}}, %[[ACC:[^ ,)]+]] = %{{.+}}) -> (f32, f32, vector<16x128xf32>) : i32
// The next tile goes in flight, then this one is waited for.
// CHECK:   scf.if
// CHECK-COUNT-9: amdgpu.gather_to_lds
// CHECK:     amdgpu.memory_counter_wait load(9)
// CHECK:   } else {
// CHECK:     amdgpu.memory_counter_wait load(0)
// CHECK:   gpu.barrier
// QK on the scaled fp8 MFMA: Q in two fp8 parts (hi, lo) with per-head
// power-of-two E8M0 scales, built once before the loop and kept in
// registers; K fragments straight from the fp8 tile with scale 1; the
// wave's 16 of the 64 tile rows x 4 K chunks x 2 parts, and one MFMA for
// both parts of the last 64 columns (hi in K 0..63, lo in 64..127, A the
// columns twice, lo's B scale from the lanes of blocks 2-3). K is the A
// operand and Q the B: S comes out transposed, each lane holding 4 tile
// rows of one head, where the softmax uses it: no LDS buffer, no barrier.
// CHECK:   vector.load %[[KVLDS]]{{.+}} : memref<2x64x576xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16xf8E4M3FN>
// CHECK-COUNT-8: amdgpu.scaled_mfma 16x16x128 {{.+}} : f8E8M0FNU, vector<32xf8E4M3FN>, f8E8M0FNU, vector<32xf8E4M3FN>, vector<4xf32>
// CHECK:   amdgpu.scaled_mfma 16x16x128 {{.+}} : f8E8M0FNU, vector<32xf8E4M3FN>, f8E8M0FNU, vector<32xf8E4M3FN>, vector<4xf32>
// CHECK-NOT: amdgpu.scaled_mfma
// CHECK-NOT: gpu.barrier
// CHECK:   vector.reduction <maximumf>
// The last 64 columns' MFMA: the B scale by K block, Q's hi (2^e) from
// lanes 0..31, lo (2^(e-4)) from lanes 32..63, picked once before the loop.
// TAIL: %[[TAILSCALE:.+]] = arith.select %{{.+}}, %[[SHI:.+]], %[[SLO:.+]] : f8E8M0FNU
// TAIL-COUNT-8: amdgpu.scaled_mfma 16x16x128 (%{{.+}}[0] *
// TAIL: amdgpu.scaled_mfma 16x16x128 (%{{.+}}[0] * %{{.+}}) * (%[[TAILSCALE]][0] * %{{.+}})
// The softmax: the maximum of the wave's 16 columns (4 per lane), the four
// waves' maxima exchanged through LDS behind a barrier, exp2 and P over
// the wave's columns.
// CHECK-SAME: %{{.+}} : vector<4xf32> into f32
// CHECK:   memref.store %{{.+}} : memref<1x16x4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK:   vector.reduction <maximumf>, %{{.+}} : vector<4xf32> into f32
// CHECK:   math.exp2 %{{.+}} : vector<4xf32>
// P = hi + lo/16 in two fp8 parts, into the row group's P buffer.
// CHECK:   %[[HI:[^ ,)]+]] = arith.truncf %{{.+}} : vector<4xf32> to vector<4xf8E4M3FN>
// CHECK:   arith.extf %[[HI]] : vector<4xf8E4M3FN> to vector<4xf32>
// CHECK:   %[[LO:[^ ,)]+]] = arith.truncf %{{.+}} : vector<4xf32> to vector<4xf8E4M3FN>
// CHECK:   vector.store %[[HI]], %[[PLDS]][%[[ROWGROUP]],
// CHECK:   vector.store %[[LO]], %[[PLDS]][%[[ROWGROUP]],
// CHECK:   %[[PT:[^ ,)]+]] = vector.transfer_read %[[PLDS]]{{.+}} vector<16x64xf8E4M3FN>
// The values are the wave's 128 of the first 512 columns of the same KV
// tile.
// CHECK:   %[[VT:[^ ,)]+]] = vector.transfer_read %[[KVLDS]][%{{.+}}, %c0{{[_0-9]*}}, %[[VBASE]]]{{.+}} vector<64x128xf8E4M3FN>
// CHECK:   vector.contract {{.+}} %[[PT]], %[[VT]], %{{.+}} : vector<16x64xf8E4M3FN>, vector<64x128xf8E4M3FN> into vector<16x128xf32>
// P's lo part accumulates into the same tile on the same V, its LHS
// scaled by 2^-4 (the MFMA pass runs it on the scaled MFMA).
// CHECK:   %[[PLO:[^ ,)]+]] = vector.transfer_read %[[PLDS]][%{{.+}}, %c1
// CHECK:   vector.contract {{.+}} %[[PLO]], %[[VT]], %{{.+}} {mla.lhs_exp2 = -4 : i64} : vector<16x64xf8E4M3FN>, vector<64x128xf8E4M3FN> into vector<16x128xf32>
// The row's sum adds the parts of the group's 4 waves (through LDS).
// CHECK: gpu.barrier
// CHECK-COUNT-4: memref.load %{{.+}}[%{{.+}}, %{{.+}}] : memref<4x16xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// A sequence with a single work item writes its bf16 output directly; the
// others write partials for the combine.
// CHECK: %[[SINGLE:.+]] = arith.cmpi eq, %{{.+}}, %c1
// CHECK: scf.if %[[SINGLE]] {
// CHECK:   arith.truncf %{{.+}} : vector<16x128xf32> to vector<16x128xbf16>
// CHECK:   vector.transfer_write %{{.+}}[%{{.+}}, %{{.+}}, %[[VBASE]]] {{.+}} : vector<16x128xbf16>, memref<?x16x512xbf16>
// CHECK: } else {
// CHECK:   vector.transfer_write %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %[[VBASE]]] {{.+}} : vector<16x128xf32>, memref<?x4x16x512xf32>
// CHECK: gpu.func @mla_combine({{.+}}) kernel
// CHECK-SAME: grid = ["num_sequences", "16", "1"]
// The combine skips sequences of fewer than two work items.
// CHECK: %[[SPLIT:.+]] = arith.cmpi slt, %c1, %{{.+}}
// CHECK: arith.select %[[SPLIT]], %{{.+}}, %c0
// The plan kernel: one workgroup of 256 threads; q and kv for their row
// counts (the batch's bounds); the work list, schedule and status word.
// CHECK: gpu.func @mla_plan(%{{.+}}: memref<?xi32>, %{{.+}}: memref<?xi32>, %{{.+}}: memref<?x16x576xbf16>, %{{.+}}: memref<?xi8>, %{{.+}}: memref<?x4xi32>, %{{.+}}: memref<?xi32>, %{{.+}}: memref<?x3xi32>, %{{.+}}: memref<257xi32>, %{{.+}}: memref<1xi32>) workgroup(%{{.+}} : memref<4x256xi64, #gpu.address_space<workgroup>>)
// CHECK-SAME: args = ["qo_indptr", "kv_indptr", "q", "kv", "work_items", "item_indptr", "work_units", "workgroup_unit_indptr", "plan_status"], block = [256, 1, 1], grid = ["1", "1", "1"]

func.func @decode_fp8(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>,
                      %scale: tensor<1xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
                          scale(%scale : tensor<1xf32>)
                          indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
                          {kv_format = #mla.kv_format<fp8>}
                          -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %out, %lse : tensor<?x16x512xbf16>, tensor<?x16xf32>
}
