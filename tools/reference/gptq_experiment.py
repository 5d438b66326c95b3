#!/usr/bin/env python3
"""EXPERIMENT: what GPTQ-style error compensation would do for 4-bit weights.

    gptq_experiment.py CKPT --calib IDS -o OUT [--group 128] [--head gptq|rtn|int8]

Quantizes every matrix of CKPT to spark-compile's w4a16 grid (asymmetric 4-bit
groups along the input, f16 scale and zero per group, the grid searched over
shrunk [min, max] ranges) in two ways and writes OUT, a checkpoint whose
matrices are the dequantized values (F32), to compile with --dtype=f32 and
measure with spark-perplexity:

* the columns in order, each group's grid chosen when the group starts, and
  each column's rounding error spread over the columns not yet quantized with
  the inverse of H = X^T X of the product's calibrated inputs (GPTQ, Frantar
  et al. 2022), the inputs captured by running the training script's PyTorch
  model on the calibration ids;
* with --head: the tied head by GPTQ too (`gptq`), by plain rounding (`rtn`),
  or as int8 per row (`int8`).

Not part of the compiler: it measures whether building GPTQ into
spark-compile would pay off (docs/quantization.md).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "train"))
from nano_model import SparkForCausalLM  # noqa: E402
from spark_reference import load_weights, write_checkpoint  # noqa: E402


def f16(v):
    return v.astype(np.float16).astype(np.float64)


def group_grid(w, top=15, symmetric=False):
    """Per row of w [N, G]: (scale, zero) of the shrunk [min, max] grid of
    codes 0..top (15: 4 bits) with the least squared error; `symmetric`:
    zero point 8 (w4a8's grid), the scale from the largest |w|."""
    if symmetric:
        return symmetric_grid(w)
    lo = np.minimum(w.min(axis=1), 0.0)
    hi = np.maximum(w.max(axis=1), 0.0)
    best_err = np.full(len(w), np.inf)
    best_s = np.ones(len(w))
    best_z = np.zeros(len(w))
    for shrink in (1.0, 0.95, 0.9, 0.85, 0.8, 0.75):
        a, b = lo * shrink, hi * shrink
        s = f16(np.where(b > a, (b - a) / top, 1.0))
        z = np.clip(np.round(-a / s), 0, top)
        q = np.clip(np.round(w / s[:, None] + z[:, None]), 0, top)
        err = (((q - z[:, None]) * s[:, None] - w) ** 2).sum(axis=1)
        take = err < best_err
        best_err = np.where(take, err, best_err)
        best_s = np.where(take, s, best_s)
        best_z = np.where(take, z, best_z)
    return best_s, best_z


def symmetric_grid(w):
    """group_grid's symmetric form: codes 0..15 for (code - 8) * scale, the
    scale largest |w| / 8 or / 7, shrunk, with the least squared error."""
    largest = np.abs(w).max(axis=1)
    best_err = np.full(len(w), np.inf)
    best_s = np.ones(len(w))
    for divisor in (8.0, 7.5, 7.0):
        for shrink in (1.0, 0.95, 0.9, 0.85, 0.8):
            s = f16(np.where(largest > 0, largest * shrink / divisor, 1.0))
            q = np.clip(np.round(w / s[:, None] + 8), 0, 15)
            err = (((q - 8) * s[:, None] - w) ** 2).sum(axis=1)
            take = err < best_err
            best_err = np.where(take, err, best_err)
            best_s = np.where(take, s, best_s)
    return best_s, np.full(len(w), 8.0)


def gptq(w, H, group, damp=0.01, grid=False, top=15, symmetric=False):
    """The GPTQ rounding of w [N, K] to codes 0..top: its dequantized values,
    and with `grid` also the codes [N, K] and each group's scale and zero
    point [N, K/group]."""
    w = w.copy()
    N, K = w.shape
    H = H.copy()
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    w[:, dead] = 0
    H += damp * np.mean(np.diag(H)) * np.eye(K)
    Hinv = np.linalg.cholesky(np.linalg.inv(H)).T  # upper
    q = np.zeros_like(w)
    codes = np.zeros((N, K), dtype=np.int64)
    scales = np.zeros((N, K // group))
    zeros = np.zeros((N, K // group))
    s = z = None
    for i in range(K):
        if i % group == 0:
            s, z = group_grid(w[:, i:i + group], top, symmetric)
            scales[:, i // group], zeros[:, i // group] = s, z
        codes[:, i] = np.clip(np.round(w[:, i] / s + z), 0, top)
        q[:, i] = (codes[:, i] - z) * s
        err = (w[:, i] - q[:, i]) / Hinv[i, i]
        w[:, i + 1:] -= np.outer(err, Hinv[i, i + 1:])
    return (q, codes, scales, zeros) if grid else q


def rtn(w, group):
    q = np.empty_like(w)
    for g in range(0, w.shape[1], group):
        s, z = group_grid(w[:, g:g + group])
        q[:, g:g + group] = (np.clip(np.round(w[:, g:g + group] / s[:, None] + z[:, None]), 0, 15)
                             - z[:, None]) * s[:, None]
    return q


def load_model(ckpt, weights=None):
    """(config, weights, model): CKPT's config.json, its tensors as numpy
    arrays (`weights` if given) and the training script's PyTorch model
    holding them in f32."""
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    if weights is None:
        weights = load_weights(ckpt)
    model = SparkForCausalLM(config)
    model.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in weights.items()})
    return config, weights, model


def read_ids(path):
    with open(path) as f:
        return [[int(t) for t in line.split()] for line in f if line.strip()]


def second_moments(model, calib):
    """{weight name: X^T X} of every matrix's calibrated input (the head's:
    the final norm's output), captured with hooks over the sequences of
    `calib` (lists of token ids). The head-wise gate is left out: the
    compiler keeps it in full precision."""
    H = {}

    def add(name, x):
        x = x.detach().double().reshape(-1, x.shape[-1])
        H[name] = H.get(name, 0) + (x.T @ x).numpy()

    handles = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and not name.endswith("g_proj"):
            handles.append(module.register_forward_hook(
                lambda m, i, o, name=name: add(name + ".weight", i[0])))
    handles.append(model.model.norm.register_forward_hook(
        lambda m, i, o: add("model.embedding.weight", o)))
    with torch.no_grad():
        for ids in calib:
            model(torch.tensor([ids]))
    for handle in handles:
        handle.remove()
    return H


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("--calib", required=True)
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--head", default="gptq", choices=["gptq", "rtn", "int8"])
    ap.add_argument("--method", default="gptq", choices=["gptq", "rtn"])
    args = ap.parse_args()
    if os.path.exists(args.out):
        sys.exit(f"{args.out} exists")
    _, weights, model = load_model(args.ckpt)
    H = second_moments(model, read_ids(args.calib))
    out = dict(weights)
    for name, w in weights.items():
        if name not in H:
            continue
        if name == "model.embedding.weight" and args.head != "gptq":
            if args.head == "int8":
                scale = np.abs(w).max(axis=1, keepdims=True) / 127.0
                out[name] = np.round(w / scale) * scale
            else:
                out[name] = rtn(w, args.group)
            continue
        out[name] = gptq(w, H[name], args.group) if args.method == "gptq" else rtn(w, args.group)
        print(f"{name}: {args.method}", file=sys.stderr)
    write_checkpoint(args.ckpt, args.out, out)


if __name__ == "__main__":
    main()
