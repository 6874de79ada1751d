#!/usr/bin/env bash
# What ptxas makes of fp8 (e4m3) tensor-core instructions on sm_90a,
# without a GPU or a disassembler: it compiles eight
# `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32` (operands loaded
# from memory, one accumulator chain) beside eight f16 m16n8k16 mmas, and
# eight wgmma m64n32k32 e4m3 beside eight m64n32k16 bf16, and counts each
# kernel's SASS instructions by opcode (bits 0-11 of an instruction's first
# word), the opcodes named by kernels that hold only that instruction
# (HMMA, F2FP: each the opcode a kernel has 8 more of than a kernel without
# that instruction); a wgmma's, the one its kernel adds 8 of.
#
# Usage: bash bench/h200/mma-e4m3-probe.sh   (needs nvcc; NVCC=path to pick one)
set -euo pipefail
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
  echo "mma-e4m3-probe.sh: no nvcc at '$NVCC' (a CUDA toolkit's; set NVCC)" >&2
  exit 2
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/probe.cu" <<'EOF'
#define MMA(shape, type)                                                       \
  asm volatile("mma.sync.aligned." shape ".row.col.f32." type "." type         \
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"    \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                \
               : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]),        \
                 "r"(p[5]))
#define EIGHT(body)                                                            \
  _Pragma("unroll") for (int i = 0; i < 8; ++i) {                              \
    const unsigned *p = in + 6 * (32 * i + threadIdx.x);                       \
    body;                                                                      \
  }
#define KERNEL(name, body)                                                     \
  extern "C" __global__ void name(const unsigned *in, float *out) {            \
    float c[4] = {0, 0, 0, 0};                                                 \
    EIGHT(body)                                                                \
    out[threadIdx.x] = c[0] + c[1] + c[2] + c[3];                              \
  }
KERNEL(mma_f16_m16n8k16, MMA("m16n8k16", "f16"))
KERNEL(mma_e4m3_m16n8k32, MMA("m16n8k32", "e4m3"))
#define WGMMA(shape, type, tail)                                               \
  asm volatile("wgmma.mma_async.sync.aligned." shape ".f32." type "." type     \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15},"     \
               " %16, %17, 1, 1, 1" tail ";"                                   \
               : "+f"(w[0]), "+f"(w[1]), "+f"(w[2]), "+f"(w[3]), "+f"(w[4]),   \
                 "+f"(w[5]), "+f"(w[6]), "+f"(w[7]), "+f"(w[8]), "+f"(w[9]),   \
                 "+f"(w[10]), "+f"(w[11]), "+f"(w[12]), "+f"(w[13]),           \
                 "+f"(w[14]), "+f"(w[15])                                      \
               : "l"(a + 2 * i), "l"(b + 2 * i))
#define WG_KERNEL(name, body)                                                  \
  extern "C" __global__ void name(unsigned long long a, unsigned long long b, \
                                  float *out) {                                \
    float w[16] = {};                                                          \
    asm volatile("wgmma.fence.sync.aligned;");                                 \
    _Pragma("unroll") for (int i = 0; i < 8; ++i) { body; }                    \
    asm volatile("wgmma.commit_group.sync.aligned;");                          \
    asm volatile("wgmma.wait_group.sync.aligned 0;");                          \
    float s = 0;                                                               \
    for (int i = 0; i < 16; ++i)                                               \
      s += w[i];                                                               \
    out[threadIdx.x] = s;                                                      \
  }
WG_KERNEL(wgmma_bf16_m64n32k16, WGMMA("m64n32k16", "bf16", ", 0, 0"))
WG_KERNEL(wgmma_e4m3_m64n32k32, WGMMA("m64n32k32", "e4m3", ""))
// Reference kernels: loop bodies of a load and an add, of a load, a
// conversion and an add.
KERNEL(only_fadd, asm volatile("add.f32 %0, %0, %1;" : "+f"(c[0]) : "f"(__uint_as_float(p[0]))))
KERNEL(only_cvt, unsigned r;
       asm volatile("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2.e4m3x2 %0, l;}"
                    : "=r"(r) : "r"(p[0]));
       c[0] += __uint_as_float(r))
EOF
"$NVCC" -arch=sm_90a -O3 -cubin -o "$dir/probe.cubin" "$dir/probe.cu"
python3 - "$dir/probe.cubin" <<'EOF'
import collections, struct, sys
data = open(sys.argv[1], 'rb').read()
shoff = struct.unpack_from('<Q', data, 0x28)[0]
entsize, count, strndx = struct.unpack_from('<HHH', data, 0x3a)
sections = [struct.unpack_from('<IIQQQQ', data, shoff + i * entsize)
            for i in range(count)]
names_at = sections[strndx][4]
def name(offset):
    tail = data[names_at + offset:]
    return tail[:tail.index(b'\0')].decode()
ops = {}
for s in sections:
    n = name(s[0])
    if n.startswith('.text.'):
        ops[n[6:]] = collections.Counter(
            struct.unpack_from('<Q', data, p)[0] & 0xfff
            for p in range(s[4], s[4] + s[5], 16))
def added(kernel, reference, times):
    """The one opcode `kernel` has `times` more of than `reference`."""
    found = [op for op, n in ops[kernel].items()
             if n - ops[reference].get(op, 0) == times]
    assert len(found) == 1, f'{kernel} against {reference}: {found}'
    return found[0]
known = {added('mma_f16_m16n8k16', 'only_fadd', 8): 'HMMA',
         added('only_cvt', 'only_fadd', 8): 'F2FP'}
for kernel in ('mma_f16_m16n8k16', 'mma_e4m3_m16n8k32',
               'wgmma_bf16_m64n32k16', 'wgmma_e4m3_m64n32k32'):
    counts = ', '.join(f'{label} {ops[kernel][op]}'
                       for op, label in sorted(known.items(), key=lambda x: x[1]))
    if kernel.startswith('wgmma'):
        counts += f', its own opcode {hex(added(kernel, "only_fadd", 8))} 8'
    print(f'{kernel} (8 of them): {counts}; '
          f'{sum(ops[kernel].values())} instructions')
EOF
