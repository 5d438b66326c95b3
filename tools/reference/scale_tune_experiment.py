#!/usr/bin/env python3
"""4-bit (and a 6-bit head's) group scales and zero points tuned end to end.

    scale_tune_experiment.py CKPT --calib IDS -o OUT [--group 128] [--head-group 32]
                             [--steps 300] [--lr 1e-3] [--seq 256]

Rounds every matrix of CKPT as gptq_experiment.py does (GPTQ against the
calibrated second moments, spark-compile's asymmetric 4-bit groups: f16 scale
and zero point per group along the input), the tied head in groups of
--head-group; then keeps every code fixed and trains only the groups' scales
and zero points with Adam so that the rounded model's next-token distribution
matches the unrounded model's on the calibration ids: the loss is
KL(f32 model || rounded model) per position, the quantity spark-perplexity
reports on held-out text. The scales and zero points are rounded to f16 at
the end (the pack stores them so), and OUT is a checkpoint whose matrices are
the dequantized values (F32), each 4-bit one with its grid beside it
(NAME.int4_codes, NAME.int4_scales, NAME.int4_zeros: docs/checkpoints.md;
a 6-bit head, --head-bits 6, NAME.int6_*).
Compiled with --quant=w4a16 and the same group sizes (--group-size,
--quant-override=model.embedding.weight=int4:G), spark-compile stores those
grids as they are; with --dtype=f32 it measures the emulation (f32
activations, dequantized weights) with spark-perplexity against the f32 build
of CKPT.

The idea is that of EfficientQAT's end-to-end training of quantization
parameters (Chen et al. 2024): the format, and so every kernel, stays as it
is; only the f16 numbers beside the codes move. Not part of the compiler
(it needs PyTorch); results in docs/quantization.md, where its grids with a
6-bit head (--head-bits 6 --head-group 128, compiled with
--quant-override=model.embedding.weight=int6) meet the w4a16 goal.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "train"))
from gptq_experiment import gptq, load_model, read_ids, second_moments  # noqa: E402
from spark_reference import write_checkpoint  # noqa: E402


class Grouped:
    """One matrix as fixed codes [N, K] with trainable per-group scale and
    zero point: value = (code - zero) * scale."""

    def __init__(self, codes, scales, zeros, group, tune_codes, top=15, tune_zeros=True):
        self.codes = torch.tensor(codes, dtype=torch.float32)
        self.group = group
        self.top = top  # the largest code
        self.tune_zeros = tune_zeros
        self.s0 = torch.tensor(scales, dtype=torch.float32)
        self.z0 = torch.tensor(zeros, dtype=torch.float32)
        # relative parameters, so one learning rate serves every matrix
        self.a = torch.zeros_like(self.s0, requires_grad=True)
        self.b = torch.zeros_like(self.z0, requires_grad=tune_zeros)
        # --tune-codes: each code's offset in code units, rounded in the
        # forward pass with a straight-through gradient; else None
        self.u = torch.zeros_like(self.codes, requires_grad=True) if tune_codes else None

    def rounded_codes(self):
        """The codes as they stand: GPTQ's, moved by u."""
        if self.u is None:
            return self.codes
        c = self.codes + self.u
        return c + (torch.clamp(torch.round(c), 0, self.top) - c).detach()

    def scales_zeros(self):
        return self.s0 * (1 + self.a), self.z0 + self.b

    def value(self, round_f16=False):
        s, z = self.scales_zeros()
        if round_f16:
            s = s.half().float()
            z = z.half().float()
        N, K = self.codes.shape
        c = self.rounded_codes().view(N, K // self.group, self.group)
        return ((c - z[..., None]) * s[..., None]).view(N, K)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("--calib", required=True)
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--head-group", type=int, default=32)
    ap.add_argument("--symmetric", action="store_true",
                    help="w4a8's grids: zero point 8, only the scales (and codes) tuned; "
                         "the grids are written without zero points")
    ap.add_argument("--no-grids", action="store_true",
                    help="write only the dequantized values, not each 4-bit matrix's grid "
                         "(NAME.int4_codes, .int4_scales, .int4_zeros) beside them")
    ap.add_argument("--head-bits", type=int, default=4,
                    help="bits of the tied head's codes: 4, or 6 (asymmetric, also with "
                         "--symmetric; compile with --quant-override=model.embedding.weight="
                         "int6:G); 5 models a format the compiler does not have (no grid written)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seq", type=int, default=256, help="tokens per training window")
    ap.add_argument("--batch", type=int, default=4, help="windows per step")
    ap.add_argument("--threads", type=int, default=2,
                    help="PyTorch threads (spark-nano on a 2-core VM: one thread ran a step "
                         "in 0.8 s, two in 1.7 s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tune-codes", type=float, default=0.0, metavar="LR",
                    help="also move the codes (straight-through rounding) at this learning rate "
                         "in code units (0: the codes stay GPTQ's)")
    ap.add_argument("--tune-rest", action="store_true",
                    help="also train the tensors the build keeps in full precision (the norms' "
                         "weights, the head-wise gate) at a fifth of the learning rate")
    args = ap.parse_args()
    if os.path.exists(args.out):
        sys.exit(f"{args.out} exists")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    _, weights, teacher = load_model(args.ckpt)
    teacher.eval()
    calib = read_ids(args.calib)
    H = second_moments(teacher, calib)

    grouped = {}
    t0 = time.time()
    for name, w in weights.items():
        if name not in H:
            continue
        head = name == "model.embedding.weight"
        group = args.head_group if head else args.group
        top = (1 << args.head_bits) - 1 if head else 15
        # 6-bit groups are asymmetric in spark-compile, whatever the scheme
        symmetric = args.symmetric and top == 15
        q, codes, scales, zeros = gptq(w, H[name], group, grid=True, top=top,
                                       symmetric=symmetric)
        grouped[name] = Grouped(codes, scales, zeros, group, args.tune_codes > 0, top,
                                tune_zeros=not symmetric)
        err = np.abs(grouped[name].value().detach().numpy() - q).max()
        assert err < 1e-5, (name, err)
    print(f"GPTQ: {len(grouped)} matrices in {time.time() - t0:.0f} s", file=sys.stderr)

    _, _, student = load_model(args.ckpt, weights)
    for p in student.parameters():
        p.requires_grad_(False)
    modules = dict(student.named_modules())

    def install():
        for name, g in grouped.items():
            module = modules[name[:-len(".weight")]]
            # a plain tensor attribute in place of the parameter, so that the
            # graph reaches the scales
            module._parameters.pop("weight", None)
            module.weight = g.value()

    windows = []
    for ids in calib:
        for i in range(0, len(ids) - 1, args.seq):
            if len(ids) - i >= 32:
                windows.append(ids[i:i + args.seq])
    # (symmetric grids keep every zero point at 8)
    params = [p for g in grouped.values() for p in (g.a, g.b) if p.requires_grad]
    rest = {}
    if args.tune_rest:
        for name, p in student.named_parameters():
            if name not in grouped:
                p.requires_grad_(True)
                rest[name] = p
    opt = torch.optim.Adam([{"params": params},
                            {"params": list(rest.values()), "lr": args.lr / 5},
                            {"params": [g.u for g in grouped.values() if g.u is not None],
                             "lr": args.tune_codes}], lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps)

    def kl_of(batch):
        x = torch.tensor(batch)
        with torch.no_grad():
            ref = F.log_softmax(teacher(x), dim=-1)
        out = F.log_softmax(student(x), dim=-1)
        return (ref.exp() * (ref - out)).sum(-1).mean()

    t0 = time.time()
    for step in range(args.steps):
        pick = torch.randint(len(windows), (args.batch,))
        length = min(len(windows[i]) for i in pick.tolist())
        batch = [windows[i][:length] for i in pick.tolist()]
        install()
        loss = kl_of(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step}: KL {loss.item():.5f} ({time.time() - t0:.0f} s)", file=sys.stderr)

    out = dict(weights)
    moved = 0
    with torch.no_grad():
        for name, g in grouped.items():
            out[name] = g.value(round_f16=True).numpy().astype(np.float64)
            moved += int((g.rounded_codes() != g.codes).sum())
            if g.top in (15, 63) and not args.no_grids:
                # the grid itself, for spark-compile to store as it is
                s, z = g.scales_zeros()
                kind = "int4" if g.top == 15 else "int6"
                out[f"{name}.{kind}_codes"] = g.rounded_codes().numpy().astype(np.uint8)
                out[f"{name}.{kind}_scales"] = s.half().numpy()
                if g.tune_zeros:
                    out[f"{name}.{kind}_zeros"] = z.half().numpy()
        print(f"codes changed: {moved} of {sum(g.codes.numel() for g in grouped.values())}",
              file=sys.stderr)
        for name, p in rest.items():
            out[name] = p.detach().numpy().astype(np.float64)
    write_checkpoint(args.ckpt, args.out, out)


if __name__ == "__main__":
    main()
