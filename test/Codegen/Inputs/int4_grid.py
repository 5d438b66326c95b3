#!/usr/bin/env python3
"""Test helper for checkpoints that bring their own 4-bit grids.

    int4_grid.py write CKPT OUT --group G [--symmetric] [--head-bits 6] [--damage KIND]
    int4_grid.py strip CKPT OUT
    int4_grid.py compare IMPORTED.json SEARCHED.json --min-gain-db DB

write: OUT is CKPT with every matrix whose input splits into groups of G (but
the head-wise gate, which no build quantizes) replaced by values on a 4-bit
grid, and that grid beside it (NAME.int4_codes U8, NAME.int4_scales F16,
NAME.int4_zeros F16; docs/checkpoints.md). The grids are ones spark-compile's
own search would not choose: each group's step is 1.1x its range / 15 and
its zero point is not a whole number (asymmetric), or the step is 1.1x its
largest |value| / 7 (symmetric, zero point 8, no zeros tensor). --head-bits 6
gives the tied head (model.embedding.weight) an asymmetric 6-bit grid
instead (step 1.1x its range / 63; NAME.int6_codes, .int6_scales,
.int6_zeros). --damage makes
the file wrong in one way: `value` moves one value off its grid, `code` writes
a code of 16, `part` drops the grid of one matrix the build stacks with
another (mlp.up_proj beside mlp.gate_proj).

strip: OUT is CKPT without its grid tensors (the same values).

compare: reads two spark-fidelity --json reports against the same f32 build
and fails unless the first one's logits SNR beats the second's by DB.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools", "reference"))
from spark_reference import read_safetensors, write_checkpoint  # noqa: E402

SUFFIXES = tuple(f".int{b}_{part}" for b in (4, 6) for part in ("codes", "scales", "zeros"))


def grid(w, group, symmetric, rng, top=15):
    n, k = w.shape
    g = w.reshape(n, k // group, group)
    if symmetric:
        scale = (np.abs(g).max(axis=2) * 1.1 / 7).astype(np.float16)
        zero = np.full(scale.shape, 8.0, dtype=np.float16)
    else:
        lo, hi = g.min(axis=2), g.max(axis=2)
        scale = ((hi - lo) * 1.1 / top).astype(np.float16)
        zero = (-lo / scale.astype(np.float64) + rng.uniform(0.2, 0.6, scale.shape)).astype(np.float16)
    s = scale.astype(np.float64)[..., None]
    z = zero.astype(np.float64)[..., None]
    codes = np.clip(np.round(g / s + z), 0, top)
    values = ((codes - z) * s).reshape(n, k)
    return values, codes.reshape(n, k).astype(np.uint8), scale, zero


def write(args):
    rng = np.random.default_rng(5)
    tensors = read_safetensors(os.path.join(args.ckpt, "model.safetensors"))
    out = {}
    for name, w in sorted(tensors.items()):
        out[name] = w
        if w.ndim != 2 or w.shape[1] % args.group or name.endswith("g_proj.weight"):
            continue
        six = args.head_bits == 6 and name == "model.embedding.weight"
        values, codes, scale, zero = grid(w, args.group, args.symmetric and not six, rng,
                                          63 if six else 15)
        out[name] = values
        if args.damage == "part" and name.endswith("mlp.up_proj.weight"):
            continue
        kind = "int6" if six else "int4"
        out[f"{name}.{kind}_codes"] = codes
        out[f"{name}.{kind}_scales"] = scale
        if six or not args.symmetric:
            out[f"{name}.{kind}_zeros"] = zero
    victim = "model.layers.0.mlp.down_proj.weight"
    if args.damage == "value":
        out[victim] = out[victim].copy()
        out[victim][3, 5] += 0.5 * float(out[victim + ".int4_scales"][3, 0]) + 0.01
    elif args.damage == "code":
        out[victim + ".int4_codes"] = out[victim + ".int4_codes"].copy()
        out[victim + ".int4_codes"][2, 7] = 16
    write_checkpoint(args.ckpt, args.out, out)


def strip(args):
    tensors = read_safetensors(os.path.join(args.ckpt, "model.safetensors"))
    write_checkpoint(args.ckpt, args.out,
                     {n: v for n, v in tensors.items() if not n.endswith(SUFFIXES)})


def logits_snr(path):
    with open(path) as f:
        report = json.load(f)
    return report["logits"]["snr_db"]


def compare(args):
    imported, searched = logits_snr(args.imported), logits_snr(args.searched)
    # null: identical logits, better than any finite figure
    gain = float("inf") if imported is None else imported - (searched or float("inf"))
    print(f"logits SNR: imported grid {imported} dB, compiler's own rounding {searched} dB")
    if not gain >= args.min_gain_db:
        sys.exit(f"the imported grid gains {gain} dB; expected at least {args.min_gain_db}")
    print(f"imported grid ahead by at least {args.min_gain_db} dB")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("ckpt")
    w.add_argument("out")
    w.add_argument("--group", type=int, required=True)
    w.add_argument("--symmetric", action="store_true")
    w.add_argument("--head-bits", type=int, choices=(4, 6), default=4)
    w.add_argument("--damage", choices=("value", "code", "part"))
    s = sub.add_parser("strip")
    s.add_argument("ckpt")
    s.add_argument("out")
    c = sub.add_parser("compare")
    c.add_argument("imported")
    c.add_argument("searched")
    c.add_argument("--min-gain-db", type=float, required=True)
    args = ap.parse_args()
    {"write": write, "strip": strip, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main()
