#!/usr/bin/env python3
"""Runs mla.decode at random valid shapes through mla-run and checks each
against the float64 reference.

    scripts/random-shapes.py [--seed S] [--count N] [--mla-run PATH]

Each case draws a format, a backend (the emu with the gfx950 or the
sm_90a kernels, or the cpu pipelines), heads, q_len (one for the batch or
one a sequence), a batch of kv lengths
(empty sequences and tile edges among them), head dimensions, a paged
cache or a pool with spare rows, sharp attention, outlier rows and columns
of the cache, another softmax scale, a forced split count,
wave mapping or lane order. One line per case; exit 1 if any case fails
(an error, a crash, or numbers outside the tolerance). The same seed
draws the same cases.
"""
import argparse
import random
import subprocess
import sys
import time

FORMATS = ['fp8', 'bf16', 'mxfp4']
HEADS = [16, 32, 48, 64, 80, 96, 112, 128]
# (Dqk, Dv): the gfx950 kernels need Dqk a multiple of 64.
DIMS = [(576, 512), (192, 128), (64, 64), (320, 256)]
SM90_DIMS = DIMS + [(160, 128)]


def kv_length(rng):
    return rng.choice([0, 1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257,
                       rng.randint(1, 80), rng.randint(60, 900)])


def draw_case(rng):
    backend = rng.choice(['gfx950', 'gfx950', 'sm_90a', 'cpu'])
    kv_lens = [kv_length(rng) for _ in range(rng.randint(1, 5))]
    # One q_len for the batch, or (a third of the cases) one a sequence.
    q_lens = [rng.choice([1, 1, 2, 3, 4])]
    if rng.random() < 1 / 3:
        q_lens = [rng.randint(1, 4) for _ in kv_lens]
    args = ['--generate', '--format', rng.choice(FORMATS),
            '--heads', str(rng.choice(HEADS)),
            '--q-len', ','.join(map(str, q_lens)),
            '--kv-len', ','.join(map(str, kv_lens)),
            '--seed', str(rng.randint(0, 10**6))]
    if backend == 'cpu':
        args = ['--backend', 'cpu', '--pipeline',
                rng.choice(['split', 'decompose'])] + args
    else:
        args = ['--backend', 'emu', '--target', backend] + args
    if rng.random() < 0.2:
        dqk, dv = rng.choice(SM90_DIMS if backend == 'sm_90a' else DIMS)
        args += ['--qk-dim', str(dqk), '--v-dim', str(dv)]
    if rng.random() < 0.4:
        args += ['--page-size', str(rng.choice([1, 2, 16, 32, 64, 128, 256]))]
    if rng.random() < 0.2:
        args += ['--spare-rows', str(rng.randint(1, 300))]
    if rng.random() < 0.3:
        args += ['--q-scale', str(rng.choice([30, 100, 300, 1000]))]
    if rng.random() < 0.2:
        args += ['--outliers', str(rng.randint(1, 4))]
    if rng.random() < 0.15:
        args += ['--sm-scale', str(rng.choice([0.01, 0.0722, 0.3, 1.0]))]
    # 32 items a sequence or more: sm_90a's combine cuts its columns into
    # slices (mla::combineSlices).
    if 'decompose' not in args and rng.random() < 0.2:
        splits = (rng.randint(1, 12) if rng.random() < 0.7
                  else rng.randint(32, 64))
        args += ['--splits', str(splits)]
    if backend != 'cpu' and rng.random() < 0.2:
        args += ['--emu-schedule-seed', str(rng.randint(1, 99))]
    if backend == 'gfx950' and rng.random() < 0.2:
        args += ['--waves-per-row-group', str(rng.choice([1, 2, 4]))]
    # 32 rows a wave: H a multiple of 32, two or more waves a group (bf16
    # not with four: its 32-row groups leave a tile of 32 rows, under 16 a
    # wave, which the kernel refuses with a diagnostic).
    value = lambda flag: args[args.index(flag) + 1] if flag in args else None
    split = value('--waves-per-row-group')
    if (backend == 'gfx950' and int(value('--heads')) % 32 == 0
            and split != '1'
            and not (value('--format') == 'bf16' and split == '4')
            and rng.random() < 0.3):
        args += ['--rows-per-wave', str(rng.choice([16, 32]))]
    # sm_90a: 32-row blocks (at any H: rows past the item's pad).
    if backend == 'sm_90a' and rng.random() < 0.3:
        args += ['--rows-per-wave', '32']
    # sm_90a: defaults chosen for sequences of 1-4 tokens (32-row blocks
    # from 32 rows of H x tokens), whatever q_len the batch has.
    elif backend == 'sm_90a' and rng.random() < 0.3:
        args += ['--query-tokens', str(rng.randint(1, 4))]
    return args


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--count', type=int, default=20)
    parser.add_argument('--mla-run', default='mla-run')
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    failures = 0
    for _ in range(opts.count):
        args = draw_case(rng)
        start = time.time()
        run = subprocess.run([opts.mla_run] + args, capture_output=True,
                             text=True)
        passed = run.returncode == 0 and run.stdout.rstrip().endswith('PASS')
        errors = [l for l in run.stdout.splitlines()
                  if l.startswith('rel_err')]
        detail = errors[0] if passed else (
            'exit %d: %s' % (run.returncode,
                             (run.stdout + run.stderr).strip()[-600:]))
        print('%s %5.1fs mla-run %s: %s' % ('ok  ' if passed else 'FAIL',
                                           time.time() - start,
                                           ' '.join(args), detail),
              flush=True)
        failures += not passed
    print('random shapes: %d of %d cases passed (seed %d)' %
          (opts.count - failures, opts.count, opts.seed))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
