"""The AMX check: run `ctest -L amx` (or this script) on a machine with AMX.

Builds the `mini` preset with `spark-compile --target=spr`, then
- prints which kernels the CPU gets; without AMX (CPUID or the kernel's tile
  permission) it prints "[SKIP] no AMX: <reason>" and exits 77, which ctest
  reports as skipped;
- for a bf16 build (tdpbf16ps tiles) and a w8a8 build (tdpbssd tiles) checks
  the AMX prefill numerics: logits of the AMX path and of the non-AMX path of
  the same build (AVX-512, resp. AVX512-VNNI) against the float64 reference
  and against each other (floors in BUILDS);
- measures prefill (pp256) and decode (tg32) of both paths with spark-bench
  and prints the ratio (a measurement, not a pass condition).
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


# (build flags, the non-AMX variant it is compared with, SNR floor vs the
# reference, SNR floor of AMX vs that variant). w8a8: AMX int8 tiles and the
# VNNI kernels sum the same int8 codes exactly, so they must agree closely.
BUILDS = {
    "bf16": (["--dtype=bf16"], "avx512", 30.0, 30.0),
    "w8a8": (["--quant=w8a8"], "avx512vnni", 20.0, 60.0),
}


def check_build(tmp, ckpt, name, prompt, truth):
    flags, other, floor, between_floor = BUILDS[name]
    out = os.path.join(tmp, "spr-" + name)
    run([os.path.join(BIN, "spark-compile"), ckpt, "--target=spr", *flags,
         "--max-context=512", "-o", out, "--quiet"])
    logits = {}
    for variant in ("amx", other):
        path = os.path.join(tmp, "%s-%s.npy" % (name, variant))
        run([os.path.join(BIN, "spark-run"), out, "--prompt-ids", ",".join(map(str, prompt)),
             "--n-predict", "1", "--chunk", "64", "--logits-out", path],
            env={"SPARK_X86_VARIANT": variant})
        logits[variant] = np.load(path)
    failed = []
    for variant, rows in logits.items():
        value = snr(rows, truth)
        print("%s %s prefill logits vs reference: SNR %.1f dB, greedy agreement %.3f" % (
            name, variant, value, np.mean(rows.argmax(1) == truth.argmax(1))))
        if value < floor:
            failed.append("%s %s vs reference: %.1f dB < %.1f" % (name, variant, value, floor))
    between = snr(logits["amx"], logits[other])
    print("%s amx vs %s logits: SNR %.1f dB" % (name, other, between))
    if between < between_floor:
        failed.append("%s amx vs %s: %.1f dB < %.1f" % (name, other, between, between_floor))
    speeds = {}
    for variant in ("amx", other):
        table = run([os.path.join(BIN, "spark-bench"), out, "-p", "256", "-n", "32", "-t", "2",
                     "-r", "2"], env={"SPARK_X86_VARIANT": variant}).stdout
        speeds[variant] = {m.group(1): float(m.group(2)) for m in
                           re.finditer(r"\| (pp256|tg32) \| ([0-9.]+)", table)}
        print("%s %s: pp256 %.1f tok/s, tg32 %.1f tok/s" % (
            name, variant, speeds[variant]["pp256"], speeds[variant]["tg32"]))
    print("%s AMX / %s prefill ratio: %.2fx" % (
        name, other, speeds["amx"]["pp256"] / speeds[other]["pp256"]))
    return failed


def main():
    tmp = tempfile.mkdtemp(prefix="spark-amx-")
    try:
        ckpt, out = os.path.join(tmp, "mini"), os.path.join(tmp, "probe")
        run([os.path.join(BIN, "spark-mkmodel"), "--preset", "mini", "--dtype", "f32", "-o", ckpt])
        run([os.path.join(BIN, "spark-compile"), ckpt, "--target=spr", "--dtype=bf16",
             "--max-context=32", "-o", out, "--quiet"])
        probe = run([os.path.join(BIN, "spark-run"), out, "--prompt-ids", "1", "--n-predict", "1",
                     "--print-dispatch"])
        print(probe.stderr.strip())
        if "x86-amx" not in probe.stderr:
            reason = re.search(r"; (AMX not used: .*)$", probe.stderr.strip())
            print("[SKIP] no AMX: %s" % (reason.group(1) if reason else probe.stderr.strip()))
            return 77
        prompt = [int(t) for t in np.random.default_rng(3).integers(0, 4096, 160)]
        truth = ref.Model(ckpt).logits(prompt)
        failed = []
        for name in BUILDS:
            failed += check_build(tmp, ckpt, name, prompt, truth)
        if failed:
            print("FAILED: " + "; ".join(failed))
            return 1
        print("AMX check passed")
        return 0
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
