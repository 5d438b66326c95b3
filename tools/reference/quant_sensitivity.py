#!/usr/bin/env python3
"""How much a checkpoint amplifies weight-quantization noise.

Runs the float64 reference on a prompt with some weights replaced by their
round-to-nearest quantized values (int8 per output row, or 4-bit asymmetric
min/max groups of 128) and prints the logits SNR against the unquantized
model for: every matrix; each matrix kind alone; the first and the last
layer alone; the tied head as a product only and as product and lookup.
A model whose first layer alone costs far more than its last layer amplifies
errors on the way to the logits; no quantizer of the same bits does better
than these numbers suggest.

usage: quant_sensitivity.py CHECKPOINT [--bits 4|8] [--prompt-length 150]
"""
import argparse
import copy
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spark_reference as ref  # noqa: E402

KINDS = ("wq", "wk", "wv", "wo", "wgate", "wup", "wdown")


def int8_rows(w):
    scale = np.abs(w).max(axis=1, keepdims=True) / 127
    scale[scale == 0] = 1
    return np.round(w / scale) * scale


def int4_groups(w, group=128):
    rows, cols = w.shape
    if cols % group:
        return int8_rows(w)
    x = w.reshape(rows, cols // group, group)
    lo, hi = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
    scale = (hi - lo) / 15
    scale[scale == 0] = 1
    zero = np.round(-lo / scale)
    return ((np.clip(np.round(x / scale) + zero, 0, 15) - zero) * scale).reshape(rows, cols)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--bits", type=int, choices=(4, 8), default=4)
    parser.add_argument("--prompt-length", type=int, default=150)
    args = parser.parse_args()
    quantize = int4_groups if args.bits == 4 else int8_rows
    model = ref.Model(args.checkpoint)
    vocab = model.head.shape[0]
    prompt = [int(t) for t in np.random.default_rng(7).integers(0, vocab, args.prompt_length)]
    truth = model.logits(prompt)

    def snr(kinds=KINDS, layers=None, head=False, lookup=False):
        m = copy.deepcopy(model)
        for i, layer in enumerate(m.layers):
            if layers is None or i in layers:
                for kind in kinds:
                    setattr(layer, kind, quantize(getattr(layer, kind)))
        if head:
            m.head = quantize(m.head)
            if lookup:
                m.embedding = m.head
        error = m.logits(prompt) - truth
        return 10 * np.log10((truth ** 2).sum() / (error ** 2).sum())

    last = len(model.layers) - 1
    tied = model.config["tie_word_embeddings"]
    rows = [("every matrix and the head", snr(head=True, lookup=tied))]
    if tied:
        rows.append(("every matrix, the tied head as product only", snr(head=True)))
    rows += [("%s alone, every layer" % kind, snr(kinds=(kind,))) for kind in KINDS]
    rows += [("layer 0 alone", snr(layers={0})),
             ("layer %d alone" % last, snr(layers={last})),
             ("head as product only", snr(kinds=(), head=True))]
    if tied:
        rows.append(("tied head as product and lookup", snr(kinds=(), head=True, lookup=True)))
    print("| %d-bit weights | logits SNR dB |\n|---|---:|" % args.bits)
    for name, value in rows:
        print("| %s | %.1f |" % (name, value))


if __name__ == "__main__":
    main()
