"""The AMX check: run `ctest -L amx` (or this script) on a machine with AMX.

Builds the `mini` preset with `spark-compile --target=spr --dtype=bf16`, then
- prints which kernels the CPU gets; without AMX (CPUID or the kernel's tile
  permission) it prints "[SKIP] no AMX: <reason>" and exits 77, which ctest
  reports as skipped;
- checks the AMX prefill numerics: logits of the AMX path and of the AVX-512
  path of the same build against the float64 reference (SNR >= 30 dB each)
  and against each other;
- measures prefill (pp256) and decode (tg32) of both paths with spark-bench
  and prints the AMX / AVX-512 ratio (a measurement, not a pass condition).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SPARK_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BIN = os.environ.get("SPARK_BIN_DIR", os.path.join(SOURCE, "build", "bin"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "reference"))
import spark_reference as ref  # noqa: E402


def run(args, env=None):
    result = subprocess.run(args, capture_output=True, text=True,
                            env=dict(os.environ, **(env or {})))
    if result.returncode != 0:
        sys.exit("%s failed:\n%s%s" % (" ".join(args), result.stdout, result.stderr))
    return result


def snr(ours, truth):
    return 10 * np.log10((truth ** 2).sum() / ((ours - truth) ** 2).sum())


def main():
    tmp = tempfile.mkdtemp(prefix="spark-amx-")
    try:
        ckpt, out = os.path.join(tmp, "mini"), os.path.join(tmp, "spr")
        run([os.path.join(BIN, "spark-mkmodel"), "--preset", "mini", "--dtype", "f32", "-o", ckpt])
        run([os.path.join(BIN, "spark-compile"), ckpt, "--target=spr", "--dtype=bf16",
             "--max-context=512", "-o", out, "--quiet"])
        probe = run([os.path.join(BIN, "spark-run"), out, "--prompt-ids", "1", "--n-predict", "1",
                     "--print-dispatch"])
        print(probe.stderr.strip())
        if "x86-amx" not in probe.stderr:
            reason = re.search(r"; (AMX not used: .*)$", probe.stderr.strip())
            print("[SKIP] no AMX: %s" % (reason.group(1) if reason else probe.stderr.strip()))
            return 77
        prompt = [int(t) for t in np.random.default_rng(3).integers(0, 4096, 160)]
        truth = ref.Model(ckpt).logits(prompt)
        logits = {}
        for variant in ("amx", "avx512"):
            path = os.path.join(tmp, variant + ".npy")
            run([os.path.join(BIN, "spark-run"), out, "--prompt-ids", ",".join(map(str, prompt)),
                 "--n-predict", "1", "--chunk", "64", "--logits-out", path],
                env={"SPARK_X86_VARIANT": variant})
            logits[variant] = np.load(path)
        for variant, rows in logits.items():
            print("%s prefill logits vs reference: SNR %.1f dB, greedy agreement %.3f" % (
                variant, snr(rows, truth), np.mean(rows.argmax(1) == truth.argmax(1))))
        between = snr(logits["amx"], logits["avx512"])
        print("amx vs avx512 logits: SNR %.1f dB" % between)
        failed = [v for v in logits if snr(logits[v], truth) < 30.0]
        speeds = {}
        for variant in ("amx", "avx512"):
            table = run([os.path.join(BIN, "spark-bench"), out, "-p", "256", "-n", "32", "-t", "2",
                         "-r", "2"], env={"SPARK_X86_VARIANT": variant}).stdout
            speeds[variant] = {m.group(1): float(m.group(2)) for m in
                               re.finditer(r"\| (pp256|tg32) \| ([0-9.]+)", table)}
            print("%s: pp256 %.1f tok/s, tg32 %.1f tok/s" % (
                variant, speeds[variant]["pp256"], speeds[variant]["tg32"]))
        print("AMX / AVX-512 prefill ratio: %.2fx" % (
            speeds["amx"]["pp256"] / speeds["avx512"]["pp256"]))
        if failed:
            print("FAILED: SNR below 30 dB for %s" % ", ".join(failed))
            return 1
        print("AMX check passed")
        return 0
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
