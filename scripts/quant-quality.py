#!/usr/bin/env python3
"""Quantization quality table: every scheme of spark-compile and the emulated
llama.cpp formats on one checkpoint, measured the way llama.cpp's
`llama-perplexity --kl-divergence` measures, against the f32 build.

    scripts/quant-quality.py [--ckpt models/spark-nano] [--work DIR] [--update-docs]

Builds each configuration (host target), runs spark-perplexity on the
checkpoint's held-out text and agent sequences (heldout-text.ids,
heldout-agent.ids) with the f32 build as reference, prints a Markdown table,
writes DIR/quality.json, and with --update-docs replaces the table between the
markers in docs/quantization.md. Takes about 25 minutes on 2 cores for
spark-nano, plus the tuning below. Calibration (for static activations and importance-weighted
4-bit search) uses the checkpoint's calib.ids, drawn from training data; the
GPTQ rows also calib-32k.ids (more tokens, from the same training data).

The three "tuned grids" rows each run tools/reference/scale_tune_experiment.py
first (about 14 more minutes each; it needs PyTorch:
scripts/install-train-deps.sh, and this script run by the Python that has it,
e.g. /usr/bin/python3) and build the checkpoint it writes, whose 4- and 6-bit
grids spark-compile stores as they are.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- BEGIN quant-quality table (scripts/quant-quality.py --update-docs) -->"
END = "<!-- END quant-quality table -->"

# The tuned-grid rows: scale_tune_experiment.py's options beside the common
# ones (GPTQ in groups of 128 on calib-32k.ids, then 400 steps of scales, zero
# points, norms and codes tuned on KL to the f32 model).
TUNINGS = {
    "tuned": ["--head-group", "32"],
    "tuned-head6": ["--head-group", "128", "--head-bits", "6"],
    "tuned-head6-symmetric": ["--head-group", "128", "--head-bits", "6", "--symmetric"],
}

# (name, spark-compile flags, emulation type or TUNINGS key or None, note)
CONFIGS = [
    ("bf16", ["--dtype=bf16"], None, "weights bf16"),
    ("f32, bf16 caches", ["--kv-cache=bf16"], None, "keys and values bf16 (--kv-cache)"),
    ("f32, f16 caches", ["--kv-cache=f16"], None, "keys and values f16"),
    ("w8a16", ["--quant=w8a16"], None, "bf16 activations"),
    ("w8a8", ["--quant=w8a8"], None, "int8 per token"),
    ("w8a8 block 32", ["--quant=w8a8", "--activation-block=32"], None, "int8 per 32 inputs"),
    ("w8a8 static", ["--quant=w8a8", "--activations=static", "CALIB"], None, "calibrated scales"),
    ("w4a16 g128", ["--quant=w4a16", "--weight-importance=false", "CALIB"], None, ""),
    ("w4a16 g128 +imp", ["--quant=w4a16", "CALIB"], None, "importance-weighted"),
    ("w4a16 g64", ["--quant=w4a16", "--group-size=64", "--weight-importance=false", "CALIB"], None, ""),
    ("w4a16 g64 +imp", ["--quant=w4a16", "--group-size=64", "CALIB"], None, "importance-weighted"),
    ("w4a16 g32 +imp", ["--quant=w4a16", "--group-size=32", "CALIB"], None, "importance-weighted"),
    ("w4a16 g64 +imp, head int4:32", ["--quant=w4a16", "--group-size=64", "CALIB",
                                      "--quant-override=model.embedding.weight=int4:32"], None,
     "recipe"),
    ("w4a16 g128 +imp, head int8", ["--quant=w4a16", "CALIB",
                                    "--quant-override=model.embedding.weight=int8"], None, "recipe"),
    ("w4a16 g128 gptq", ["--quant=w4a16", "CALIB", "--gptq"], None, "GPTQ on calib.ids"),
    ("w4a16 g128 gptq 32k", ["--quant=w4a16", "CALIB32K", "--gptq"], None, "GPTQ on calib-32k.ids"),
    ("w4a16 g64 gptq 32k", ["--quant=w4a16", "--group-size=64", "CALIB32K", "--gptq"], None,
     "GPTQ on calib-32k.ids"),
    ("w4a16 g128 gptq 32k, head int8", ["--quant=w4a16", "CALIB32K", "--gptq",
                                        "--quant-override=model.embedding.weight=int8"], None,
     "GPTQ, recipe"),
    ("w4a16 g128 gptq 32k, head int4:32", ["--quant=w4a16", "CALIB32K", "--gptq",
                                           "--quant-override=model.embedding.weight=int4:32"],
     None, "GPTQ, recipe"),
    ("w4a16 g128, head int4:32, tuned grids",
     ["--quant=w4a16", "--quant-override=model.embedding.weight=int4:32"], "tuned",
     "scale_tune_experiment.py's grids, stored as they are"),
    ("w4a16 g128 +imp, head int6", ["--quant=w4a16", "CALIB",
                                    "--quant-override=model.embedding.weight=int6"], None,
     "recipe: head in 6-bit groups of 128"),
    ("w4a16 g128 gptq 32k, head int6", ["--quant=w4a16", "CALIB32K", "--gptq",
                                        "--quant-override=model.embedding.weight=int6"],
     None, "GPTQ, recipe"),
    ("w4a16 g128, head int6, tuned grids",
     ["--quant=w4a16", "--quant-override=model.embedding.weight=int6"], "tuned-head6",
     "scale_tune_experiment.py's grids (head 6-bit), stored as they are"),
    ("w4a8 g128 +imp", ["--quant=w4a8", "CALIB"], None, "int8 per token"),
    ("w4a8 g128 gptq 32k", ["--quant=w4a8", "CALIB32K", "--gptq"], None, "GPTQ, int8 per token"),
    ("w4a8 g128 gptq 32k, head int6", ["--quant=w4a8", "CALIB32K", "--gptq",
                                       "--quant-override=model.embedding.weight=int6"], None,
     "GPTQ, recipe, int8 per token"),
    ("w4a8 g128, head int6, tuned grids",
     ["--quant=w4a8", "--quant-override=model.embedding.weight=int6"], "tuned-head6-symmetric",
     "scale_tune_experiment.py --symmetric's grids (head 6-bit), int8 per token"),
    ("w4a8 g64 +imp", ["--quant=w4a8", "--group-size=64", "CALIB"], None, "int8 per token"),
    ("w4a8 g64 +imp, bf16 caches", ["--quant=w4a8", "--group-size=64", "CALIB", "--kv-cache=bf16"],
     None, "int8 per token, caches bf16"),
    ("w4a8 g64 +imp, block 64", ["--quant=w4a8", "--group-size=64", "--activation-block=64", "CALIB"],
     None, "int8 per 64 inputs"),
    ("Q8_0 (emulated)", [], "q8_0", "llama.cpp format, RTN, f32 activations"),
    ("Q4_0 (emulated)", [], "q4_0", "head Q6_K as llama-quantize"),
    ("Q4_0 pure (emulated)", [], "q4_0:same", "head Q4_0 too"),
    ("Q4_K (emulated)", [], "q4_k", "head Q6_K as llama-quantize"),
]


def log(msg):
    print(f"[quant-quality] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"quant-quality: {' '.join(cmd)} failed:\n{r.stderr}{r.stdout}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", default=os.path.join(ROOT, "models", "spark-nano"))
    ap.add_argument("--build-dir", default=os.environ.get("SPARK_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--work", default="/tmp/spark-quant-quality")
    ap.add_argument("--only", help="config names to run, separated by semicolons")
    ap.add_argument("--update-docs", action="store_true")
    args = ap.parse_args()
    bindir = os.path.join(args.build_dir, "bin")
    compile_tool = os.path.join(bindir, "spark-compile")
    ppl_tool = os.path.join(bindir, "spark-perplexity")
    for tool in (compile_tool, ppl_tool):
        if not os.access(tool, os.X_OK):
            sys.exit(f"quant-quality: {tool} missing; build first (scripts/build.sh)")
    data = {k: os.path.join(args.ckpt, f"heldout-{k}.ids") for k in ("text", "agent")}
    calib = os.path.join(args.ckpt, "calib.ids")
    calib32k = os.path.join(args.ckpt, "calib-32k.ids")
    for path in list(data.values()) + [calib, calib32k]:
        if not os.path.isfile(path):
            sys.exit(f"quant-quality: {path} missing; expected a checkpoint with held-out and calibration ids")
    os.makedirs(args.work, exist_ok=True)
    only = set(args.only.split(";")) if args.only else None
    if any(e in TUNINGS and (not only or n in only) for n, _, e, _ in CONFIGS):
        if importlib.util.find_spec("torch") is None:
            sys.exit("quant-quality: the tuned-grids rows need PyTorch (scripts/install-train-deps.sh) "
                     f"in {sys.executable}; or leave it out with --only")

    def build(name, flags, ckpt):
        out = os.path.join(args.work, name.replace(" ", "_").replace(",", "").replace("+", "").replace("(", "").replace(")", ""))
        if os.path.exists(out):
            shutil.rmtree(out)
        where = {"CALIB": f"--calib={calib}", "CALIB32K": f"--calib={calib32k}"}
        flags = [where.get(f, f) for f in flags]
        t = time.time()
        run([compile_tool, ckpt, "-o", out, "--quiet"] + flags)
        log(f"{name}: compiled in {time.time() - t:.0f} s")
        return out

    reference = build("f32", [], args.ckpt)
    results = []
    for name, flags, emulation, note in CONFIGS:
        if only and name not in only:
            continue
        ckpt = args.ckpt
        if emulation in TUNINGS:
            # GPTQ in groups of 128 on calib-32k.ids, then scales, zero
            # points, norms and codes tuned on KL to the f32 model
            ckpt = os.path.join(args.work, "ckpt-" + emulation)
            if os.path.exists(ckpt):
                shutil.rmtree(ckpt)
            t = time.time()
            run([sys.executable, os.path.join(ROOT, "tools", "reference", "scale_tune_experiment.py"),
                 args.ckpt, "--calib", calib32k, "-o", ckpt, "--group", "128",
                 "--steps", "400", "--lr", "2e-3", "--tune-rest", "--tune-codes", "2e-2"]
                + TUNINGS[emulation])
            log(f"{name}: tuned in {time.time() - t:.0f} s")
        elif emulation:
            kind, _, head = emulation.partition(":")
            ckpt = os.path.join(args.work, f"ckpt-{kind}-{head or 'llama'}")
            if os.path.exists(ckpt):
                shutil.rmtree(ckpt)
            run([sys.executable, os.path.join(ROOT, "tools", "reference", "llama_quant_emulation.py"),
                 args.ckpt, "--type", kind, "--head", head or "llama", "-o", ckpt])
        out = build(name, flags, ckpt)
        if emulation and emulation not in TUNINGS:
            with open(os.path.join(ckpt, "emulation.json")) as f:
                bpw = json.load(f)["bits_per_weight"]
        else:
            with open(os.path.join(out, "manifest.json")) as f:
                bpw = json.load(f)["bits_per_weight"]
        row = {"name": name, "note": note, "bits_per_weight": bpw, "flags": flags,
               "emulation": emulation}
        for kind, path in data.items():
            js = os.path.join(out, f"ppl-{kind}.json")
            run([ppl_tool, out, "--data", path, "--reference", reference, "--json", js, "--quiet"])
            with open(js) as f:
                row[kind] = json.load(f)
        results.append(row)
        log(f"{name}: {bpw:.3f} bpw, text KLD {row['text']['kld']['mean']:.5f}, "
            f"agent KLD {row['agent']['kld']['mean']:.5f}")
    with open(os.path.join(args.work, "quality.json"), "w") as f:
        json.dump(results, f, indent=2)

    ref_ppl = {k: results[0][k]["reference_perplexity"] for k in data} if results else {}
    lines = [
        f"Held-out text: {results[0]['text']['positions']} scored positions; held-out agent episodes: "
        f"{results[0]['agent']['positions']}. f32 build perplexity: text {ref_ppl['text']:.2f}, "
        f"agent {ref_ppl['agent']:.3f}." if results else "",
        "",
        "| build | bits/weight | text PPL | text mean KLD | text median KLD | text 99% KLD | "
        "text same top | text RMS Δp | agent PPL | agent mean KLD | agent same top |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        t, a = r["text"], r["agent"]
        lines.append(
            f"| {r['name']} | {r['bits_per_weight']:.3f} | {t['perplexity']:.2f} | "
            f"{t['kld']['mean']:.5f} ± {t['kld']['mean_stderr']:.5f} | {t['kld']['median']:.5f} | "
            f"{t['kld']['p99']:.4f} | {100 * t['same_top']:.2f}% | {100 * t['delta_p']['rms']:.3f}% | "
            f"{a['perplexity']:.3f} | {a['kld']['mean']:.5f} | {100 * a['same_top']:.2f}% |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.update_docs:
        doc = os.path.join(ROOT, "docs", "quantization.md")
        with open(doc) as f:
            text = f.read()
        if BEGIN not in text or END not in text:
            sys.exit(f"quant-quality: {doc} has no table markers")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(doc, "w") as f:
            f.write(head + BEGIN + "\n" + table + END + tail)
        log(f"updated {doc}")


if __name__ == "__main__":
    main()
