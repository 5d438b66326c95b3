#!/usr/bin/env python3
"""Writes a larger calibration set for spark-nano from its training data.

    tools/train/make_calib.py --brown DIR --out FILE [--seed 5] [--texts 48] [--episodes 16]

Windows of up to 512 tokens from randomly chosen training Brown files (never the
held-out ones) and whole training-distribution agent episodes (cut at 512),
tokenized with the committed models/spark-nano tokenizer, one sequence of ids per
line. models/spark-nano/calib-32k.ids is this script's output with the defaults
(32,052 tokens); calib.ids (4,096 tokens) is what train_nano.py writes.
"""

import argparse
import json
import os
import random
import sys

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import nano_data  # noqa: E402

NANO = os.path.join(HERE, "..", "..", "models", "spark-nano")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brown", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--texts", type=int, default=48)
    ap.add_argument("--episodes", type=int, default=16)
    args = ap.parse_args()
    with open(os.path.join(NANO, "tokenizer.json")) as f:
        tj = json.load(f)
    tok = bpe.Tokenizer([tuple(m.split(" ")) for m in tj["model"]["merges"]],
                        [t["content"] for t in tj["added_tokens"]])
    train, _ = nano_data.split_brown(args.brown)
    rng = random.Random(args.seed)
    out = []
    for doc in rng.sample(train, args.texts):
        ids = tok.encode(doc)
        start = rng.randrange(0, max(1, len(ids) - 512))
        out.append(ids[start:start + 512])
    with open(os.path.join(HERE, "chat_template.jinja")) as f:
        template = jinja2.Environment().from_string(f.read())
    for messages in nano_data.episodes(777, args.episodes):
        text = template.render(messages=[{"role": "system", "content": nano_data.SYSTEM_PROMPT}] + messages,
                               tools=nano_data.tool_schemas())
        out.append(tok.encode(text)[:512])
    with open(args.out, "w") as f:
        f.write("\n".join(" ".join(map(str, s)) for s in out) + "\n")
    print(f"{args.out}: {len(out)} sequences, {sum(map(len, out))} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()
