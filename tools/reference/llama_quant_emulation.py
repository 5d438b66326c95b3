#!/usr/bin/env python3
"""EMULATION of llama.cpp's round-to-nearest weight formats, for baselines.

    llama_quant_emulation.py CKPT --type q4_0|q4_k|q8_0|q6_k -o OUT [--head llama|same|f32]

Writes OUT, a copy of the checkpoint folder CKPT whose matrices are replaced by
their values after a round trip through the chosen llama.cpp block format
(quantize, then dequantize), stored as F32. Compile OUT with
`spark-compile OUT --dtype=f32` and compare it with spark-perplexity like any
build: that is the fidelity of llama.cpp's format on the same weights, with f32
activations (llama.cpp's CPU kernels also round the activations to 8 bits, so
the emulation is the format's best case).

This is an emulation written from the formats' descriptions, not llama.cpp's
code; it is labelled as such wherever its numbers appear:
  q8_0  blocks of 32: d = max|x| / 127 (f16), codes round(x / d).       8.5 bits
  q4_0  blocks of 32: d = (the x of largest |x|) / -8 (f16),
        codes min(15, trunc(x / d + 8.5)), value (code - 8) * d.        4.5 bits
  q4_k  super-blocks of 256 = 8 blocks of 32; per block a scale and a min from
        a weighted least-squares search (weights avg|x| + |x|, 21 candidate
        grids), both coded in 6 bits against the super-block's f16 d and
        dmin; codes 0..15, value d * sc * code - dmin * m.               4.5 bits
  q6_k  super-blocks of 256 = 16 blocks of 16; per block a scale from a
        weighted (x^2) search over 19 grids, coded in 8 bits against the
        super-block's f16 d; codes -32..31.                             6.5625 bits
The matrices are those spark-compile quantizes: every q_k_v_proj, out_proj,
gate/up/down projection and the embedding (the tied head); the head-wise gate
projection g_proj stays f32, as in spark-compile's schemes. `--head llama`
(default) gives the embedding the type llama-quantize gives a tied output
tensor (q6_k, or q8_0 when --type is q8_0); `same` uses --type; `f32` keeps it.
Prints the bits per weight over those matrices.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spark_reference import load_weights, write_checkpoint  # noqa: E402

BITS = {"q8_0": 8.5, "q4_0": 4.5, "q4_k": 4.5, "q6_k": 6.5625, "f32": 32.0}


def f16(v):
    return np.asarray(v, dtype=np.float64).astype(np.float16).astype(np.float64)


def round_away(v):
    """C's roundf / lroundf: halves away from zero."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def q8_0(w):
    x = w.reshape(-1, 32)
    amax = np.abs(x).max(axis=1, keepdims=True)
    d = amax / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    q = round_away(x * inv)
    return (q * f16(d)).reshape(w.shape)


def q4_0(w):
    x = w.reshape(-1, 32)
    idx = np.abs(x).argmax(axis=1)
    signed_max = x[np.arange(len(x)), idx][:, None]
    d = signed_max / -8.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, np.trunc(x * inv + 8.5))
    return ((q - 8) * f16(d)).reshape(w.shape)


def _qkx2(x, w, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20):
    """Per row of x [B, n] with weights w: (scale, min) of value = scale * L + min,
    min <= 0, from a least-squares search over nstep + 1 candidate grids."""
    lo = np.minimum(x.min(axis=1), 0.0)
    hi = x.max(axis=1)
    span = hi - lo
    flat = span <= 0
    span = np.where(flat, 1.0, span)
    sum_w = w.sum(axis=1)
    sum_x = (w * x).sum(axis=1)
    iscale = nmax / span
    scale = 1.0 / iscale
    L = np.clip(round_away(iscale[:, None] * (x - lo[:, None])), 0, nmax)
    best = (w * (scale[:, None] * L + lo[:, None] - x) ** 2).sum(axis=1)
    best_scale, best_min = scale.copy(), lo.copy()
    for step in range(nstep + 1):
        iscale = (rmin + rdelta * step + nmax) / span
        L = np.clip(round_away(iscale[:, None] * (x - lo[:, None])), 0, nmax)
        sum_l = (w * L).sum(axis=1)
        sum_l2 = (w * L * L).sum(axis=1)
        sum_xl = (w * L * x).sum(axis=1)
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, 1.0)
        s = (sum_w * sum_xl - sum_x * sum_l) / Ds
        m = (sum_l2 * sum_x - sum_l * sum_xl) / Ds
        pos = m > 0
        s = np.where(pos, np.divide(sum_xl, sum_l2, out=np.zeros_like(sum_xl), where=sum_l2 > 0), s)
        m = np.where(pos, 0.0, m)
        err = (w * (s[:, None] * L + m[:, None] - x) ** 2).sum(axis=1)
        take = ok & (err < best)
        best = np.where(take, err, best)
        best_scale = np.where(take, s, best_scale)
        best_min = np.where(take, m, best_min)
    best_scale = np.where(flat, 0.0, best_scale)
    return best_scale, -best_min  # the_min >= 0: value = scale * L - the_min


def q4_k(w):
    sb = w.reshape(-1, 256)
    av = np.sqrt((sb * sb).mean(axis=1, keepdims=True))
    x = sb.reshape(-1, 8, 32)
    weights = av[:, :, None] + np.abs(x)
    scales, mins = _qkx2(x.reshape(-1, 32), weights.reshape(-1, 32))
    scales, mins = scales.reshape(-1, 8), mins.reshape(-1, 8)
    max_scale = scales.max(axis=1, keepdims=True)
    max_min = mins.max(axis=1, keepdims=True)
    inv_s = np.divide(63.0, max_scale, out=np.zeros_like(max_scale), where=max_scale > 0)
    inv_m = np.divide(63.0, max_min, out=np.zeros_like(max_min), where=max_min > 0)
    ls = np.minimum(63, round_away(inv_s * scales))
    lm = np.minimum(63, round_away(inv_m * mins))
    d = f16(max_scale / 63.0)
    dmin = f16(max_min / 63.0)
    dj = (d * ls)[:, :, None]
    dm = (dmin * lm)[:, :, None]
    q = np.clip(round_away(np.divide(x + dm, dj, out=np.zeros_like(x), where=dj > 0)), 0, 15)
    return (dj * q - dm).reshape(w.shape)


def _qx(x, nmax=32):
    """Per row of x [B, n]: a symmetric scale for codes -nmax..nmax-1 from a
    search over 19 grids around -nmax / (the x of largest |x|), x^2-weighted."""
    idx = np.abs(x).argmax(axis=1)
    signed_max = x[np.arange(len(x)), idx]
    zero = np.abs(signed_max) < 1e-30
    signed_max = np.where(zero, 1.0, signed_max)
    w = x * x
    best_scale = np.zeros(len(x))
    best_err = np.full(len(x), np.inf)
    for step in range(-9, 10):
        iscale = -(nmax + 0.1 * step) / signed_max
        L = np.clip(round_away(iscale[:, None] * x), -nmax, nmax - 1)
        sum_lx = (w * L * x).sum(axis=1)
        sum_l2 = (w * L * L).sum(axis=1)
        s = np.divide(sum_lx, sum_l2, out=np.zeros_like(sum_lx), where=sum_l2 > 0)
        err = (w * (s[:, None] * L - x) ** 2).sum(axis=1)
        take = err < best_err
        best_err = np.where(take, err, best_err)
        best_scale = np.where(take, s, best_scale)
    return np.where(zero, 0.0, best_scale)


def q6_k(w):
    x = w.reshape(-1, 16, 16)
    scales = _qx(x.reshape(-1, 16)).reshape(-1, 16)
    idx = np.abs(scales).argmax(axis=1)
    max_scale = scales[np.arange(len(scales)), idx][:, None]
    iscale = np.divide(-128.0, max_scale, out=np.zeros_like(max_scale), where=max_scale != 0)
    sc = np.minimum(127, round_away(iscale * scales))
    d = f16(np.divide(1.0, iscale, out=np.zeros_like(iscale), where=iscale != 0))
    dj = (d * sc)[:, :, None]
    q = np.clip(round_away(np.divide(x, dj, out=np.zeros_like(x), where=dj != 0)), -32, 31)
    return (dj * q).reshape(w.shape)


FORMATS = {"q8_0": q8_0, "q4_0": q4_0, "q4_k": q4_k, "q6_k": q6_k}


def is_matrix(name, shape):
    if len(shape) != 2 or name.endswith("g_proj.weight"):
        return False
    return name.startswith("model.layers.") or name in ("model.embedding.weight", "lm_head.weight")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("--type", required=True, choices=sorted(FORMATS))
    ap.add_argument("--head", default="llama", choices=["llama", "same", "f32"])
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args(argv)
    if os.path.exists(args.out):
        sys.exit(f"llama_quant_emulation: {args.out} exists; give a new folder")
    with open(os.path.join(args.ckpt, "config.json")) as f:
        config = json.load(f)
    tied = config.get("tie_word_embeddings", True)
    head_type = {"llama": "q8_0" if args.type == "q8_0" else "q6_k", "same": args.type,
                 "f32": "f32"}[args.head]
    weights = load_weights(args.ckpt)
    out, bits, params = {}, 0.0, 0
    for name, w in weights.items():
        is_head = name == "lm_head.weight" or (tied and name == "model.embedding.weight")
        if is_matrix(name, w.shape):
            kind = head_type if is_head else args.type
            block = 256 if kind in ("q4_k", "q6_k") else 32
            if w.shape[1] % block:
                sys.exit(f"{args.ckpt}: {name} has rows of {w.shape[1]}, not whole {kind} blocks of {block}")
            out[name] = w if kind == "f32" else FORMATS[kind](w)
            bits += BITS[kind] * w.size
            params += w.size
        else:
            out[name] = w
    info = {"emulation_of": f"llama.cpp {args.type}", "head": head_type,
            "bits_per_weight": bits / params, "source": os.path.abspath(args.ckpt)}
    write_checkpoint(args.ckpt, args.out, out,
                     extra={"emulation.json": json.dumps(info, indent=2) + "\n"})
    print(f"{args.out}: emulated llama.cpp {args.type} (head {head_type}), "
          f"{bits / params:.4f} bits per weight over {params} matrix weights")


if __name__ == "__main__":
    main()
