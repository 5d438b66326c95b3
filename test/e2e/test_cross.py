"""End-to-end parity of the cross targets, run under emulation.

`spark-compile --target=arm64|hexagon --emit=exe` builds a static spark-run
(runner + runtime + model) for the target. arm64 runs under
qemu-aarch64-static (-cpu max: every extension, so the dot-product variant;
-cpu cortex-a53: no dot product, so the NEON floor), hexagon under
qemu-hexagon-static (v66 + HVX 128 B), and host builds under qemu-x86_64-static
(-cpu max: AVX2 without AVX-512, so the avx2 variant). All are checked against the float64
reference with the host's bounds: fp32 builds greedy-identical for 32 tokens
and max |diff| <= 1e-4 x max |logit|, the other precisions the SNR floors the
host tests lock. Without the cross tools or qemu a case prints [SKIP] and
ctest reports it skipped.
"""

import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_e2e  # noqa: E402
from test_e2e import (EMULATORS, MAX_CONTEXT, Case, compile_args,  # noqa: E402
                      missing_cross_tools, run, runner, tool)


class CrossTargets(test_e2e.EndToEnd):
    def require(self, target):
        why = missing_cross_tools(target)
        if why:
            print("[SKIP] --target=%s cannot be tested here: %s" % (target, why))
            self.skipTest(why)

    def test_arm64_fp32_parity(self):
        self.require("arm64")
        case = Case(self.tmp, "arm64-mixed", target="arm64")
        prompt = self.long_prompt(case)  # wraps the sliding rings
        for chunk in (7, 64):
            self.assertFp32Parity(case, prompt, chunk=chunk)
        dispatch = run(runner(case.out, "arm64") + ["--prompt-ids", "1", "--n-predict", "1",
                                                    "--print-dispatch"], stderr=True)
        self.assertIn("arm64-dotprod", dispatch)

    def test_arm64_floor_variant_without_dot_product(self):
        # A Cortex-A53 has no dot product: the driver must pick the NEON floor
        # (running the dotprod code there would raise SIGILL).
        self.require("arm64")
        case = Case(self.tmp, "arm64-floor", ["--untied", "--layer-types", "sfsf"],
                    target="arm64")
        dispatch = run(runner(case.out, "arm64", cpu="cortex-a53") + [
            "--prompt-ids", "1", "--n-predict", "1", "--print-dispatch"], stderr=True)
        self.assertIn("arm64-neon", dispatch)
        self.assertFp32Parity(case, self.long_prompt(case, 8), chunk=5, cpu="cortex-a53")

    def test_arm64_f16_build_of_mini(self):
        self.require("arm64")
        self.snr_of_build(["--dtype=f16"], "arm64-mini-f16", 45.0, target="arm64")

    def test_arm64_bf16_build_of_mini(self):
        self.require("arm64")
        self.snr_of_build(["--dtype=bf16"], "arm64-mini-bf16", 30.0, target="arm64")

    def test_arm64_w8a16_build_of_mini(self):
        self.require("arm64")
        self.snr_of_build(["--quant=w8a16"], "arm64-mini-w8a16", 28.0, target="arm64")

    def test_arm64_w8a8_build_of_mini(self):
        # The sdot microkernels.
        self.require("arm64")
        self.snr_of_build(["--quant=w8a8"], "arm64-mini-w8a8", 22.0, target="arm64")

    def test_arm64_static_w8a8_build_of_mini(self):
        # Calibrated by the host's fp32 build, then the sdot kernels with one
        # int8 scale per product: the host's static floor (host: 16.2 dB).
        self.require("arm64")
        calib, _ = self.calibration_file()
        self.snr_of_build(["--quant=w8a8", "--calib", calib, "--activations=static"],
                          "arm64-mini-w8a8-static", 15.0, target="arm64")

    def test_arm64_w4a16_build_of_mini(self):
        self.require("arm64")
        self.snr_of_build(["--quant=w4a16"], "arm64-mini-w4a16", 5.0, target="arm64")

    def test_arm64_w4a8_build_of_mini(self):
        self.require("arm64")
        self.snr_of_build(["--quant=w4a8"], "arm64-mini-w4a8", 5.0, target="arm64")

    def six_bit_head_checkpoint(self):
        """mini with its values on grids it brings (test/Codegen/Inputs/
        int4_grid.py): 4-bit groups of 32 for the body, 6-bit ones for the
        tied head. Built with those grids and f32 activations, a build
        computes the float64 reference of the same values to float rounding
        (host: 122 dB against the f32 build), so a wrong 6-bit code, scale or
        zero point in the embedding or logits kernel shows."""
        out = os.path.join(self.tmp, "mini-grid6")
        if not os.path.exists(out):
            run([sys.executable, os.path.join(test_e2e.SOURCE, "test", "Codegen", "Inputs",
                                              "int4_grid.py"),
                 "write", self.mini_checkpoint(), out, "--group", "32", "--head-bits", "6"])
        return out

    SIX_BIT_HEAD = ["--quant=w4a16", "--activations=f32", "--group-size=32",
                    "--quant-override=model.embedding.weight=int6"]

    def test_arm64_six_bit_head_of_mini(self):
        self.require("arm64")
        self.snr_of_build(self.SIX_BIT_HEAD, "arm64-mini-head6", 80.0, target="arm64",
                          ckpt=self.six_bit_head_checkpoint())

    def assertHeadRowsMatchHalide(self, name, scheme, head, ckpt=None, flags=(),
                                  target="arm64", prompts=(40, 1)):
        """The layers f32, the tied head at `head` precision with the
        scheme's inputs: the target's microkernel rows against Halide's
        kernel of the same build, both under qemu, for a 40-token prompt
        (prefill) and a 1-token one (decode); the logits' SNR must reach 90
        dB. arm64: the dotprod variant against the neon floor's Halide
        kernel (a Cortex-A53 has no dot product), the build's attention
        Halide's in both (--halide-kernels=attention: neon_attention.c and
        Halide's attention differ by rounding, which the bf16 inputs of the
        head turned into 85.8 dB); hexagon: the build against
        the same build with --halide-kernels. `ckpt`: another checkpoint
        than mini; `flags`: more spark-compile flags; `prompts`: the
        prompt lengths."""
        self.require(target)
        builds = {}
        for kind in ("microkernel", "halide"):
            if target == "arm64" and kind == "halide":
                builds[kind] = builds["microkernel"]  # the floor variant
                continue
            out = os.path.join(self.tmp, name + ("-halide" if kind == "halide" else ""))
            run([tool("spark-compile"), ckpt or self.mini_checkpoint(), "-o", out, "--quiet",
                 "--max-context", str(MAX_CONTEXT), *compile_args(target), "--quant=" + scheme,
                 "--quant-override=model.layers.*=none",
                 "--quant-override=model.embedding.weight=" + head, *flags,
                 *(["--halide-kernels"] if kind == "halide" else []),
                 *(["--halide-kernels=attention"] if target == "arm64" else [])])
            builds[kind] = out
        cpus = {"microkernel": "max", "halide": "cortex-a53"} if target == "arm64" else {}
        long = [int(t) for t in np.random.default_rng(7).integers(0, 4096, 40)]
        for prompt in (long[:length] for length in prompts):
            logits = {}
            for kind, out in builds.items():
                path = os.path.join(out, "logits-%s.npy" % kind)
                run(runner(out, target, cpu=cpus.get(kind)) + [
                    "--prompt-ids", ",".join(map(str, prompt)), "--n-predict", "1",
                    "--logits-out", path])
                logits[kind] = np.load(path)
            error = logits["microkernel"] - logits["halide"]
            snr = 10 * np.log10((logits["halide"] ** 2).sum() /
                                max((error ** 2).sum(), 1e-30))
            print("%s %s head (%s) vs Halide, %d-token prompt: logits SNR %.1f dB" %
                  (target, head, scheme, len(prompt), snr))
            self.assertGreaterEqual(snr, 90.0)

    def test_arm64_six_bit_head_sdot_matches_halide(self):
        # w6a8 (int8 inputs), 4 rows x 4 tokens and 4 x 1: measured 135.9
        # and 136.7 dB; with the top bits' shifts swapped 0.4 dB.
        self.assertHeadRowsMatchHalide("arm64-mini-head6-a8", "w4a8", "int6")

    def wide_checkpoint(self):
        """A two-layer mini of hidden size 640: five groups of 128 a row."""
        wide = os.path.join(self.tmp, "wide-ckpt")
        if not os.path.exists(wide):
            run([tool("spark-mkmodel"), "--preset", "mini", "--hidden-size", "640",
                 "--layers", "2", "--dtype", "f32", "-o", wide])
        return wide

    def test_arm64_four_bit_int8_input_rows_match_halide(self):
        # w4a8's sdot rows (4-bit symmetric groups, each sum started at -8 x
        # the group's input code sum), 4 x 4 tiles and 4 x 1.
        self.assertHeadRowsMatchHalide("arm64-wide-head4-a8", "w4a8", "int4",
                                       self.wide_checkpoint())

    def test_arm64_sixteen_bit_input_rows_match_halide(self):
        # w4a16, w6a16 and w8a16 with f16 inputs taken as int16 (udot on the
        # low bytes, sdot on the high ones), on a two-layer mini of hidden size
        # 640: five groups of 128 a row, so the rows' four groups at a time
        # and a last one. Measured for the 40- and 1-token prompts: 96.7 /
        # 98.3 dB (4-bit), 96.5 / 97.9 dB (6-bit), 96.5 / 99.1 dB (w8a16),
        # 105.3 / 109.3 dB (4-bit, bf16 inputs; 55.5 dB if rounded to f16).
        wide = self.wide_checkpoint()
        self.assertHeadRowsMatchHalide("arm64-wide-head4-a16", "w4a16", "int4", wide)
        self.assertHeadRowsMatchHalide("arm64-wide-head6-a16", "w4a16", "int6", wide)
        self.assertHeadRowsMatchHalide("arm64-wide-head8-a16", "w8a16", "int8", wide)
        self.assertHeadRowsMatchHalide("arm64-wide-head4-bf16", "w4a16", "int4", wide,
                                       ["--activations=bf16"])

    def test_arm64_attention_matches_halide(self):
        # neon_attention.c (the dotprod variant: every head of a token in one
        # task per range of keys) against Halide's attention (the neon floor)
        # in one f32 build of Spark's attention shape (8 query heads, 2 key /
        # value heads of 256), a sliding layer (ring of 63) and a full one:
        # a 150-token prompt in chunks of 16 (the ring wraps), then 8 decode
        # steps on 2 threads (the full layer reads two ranges of keys); every
        # position's logits. Measured: 121.3 (f32 caches), 106.7 (bf16),
        # 113.3 dB (f16); the ranges combined without their rescaling: 43.7 dB
        # (the decode steps'; a chunk of 4 or more tokens reads its keys in
        # one range).
        self.require("arm64")
        ckpt = os.path.join(self.tmp, "attention-ckpt")
        run([tool("spark-mkmodel"), "--preset", "mini", "--hidden-size", "512", "--heads", "8",
             "--kv-heads", "2", "--head-dim", "256", "--layers", "2", "--layer-types", "sf",
             "--intermediate-size", "512", "-o", ckpt])
        prompt = [int(t) for t in np.random.default_rng(7).integers(0, 4096, 150)]
        for cache in ("f32", "bf16", "f16"):
            out = os.path.join(self.tmp, "arm64-attention-" + cache)
            run([tool("spark-compile"), ckpt, "-o", out, "--quiet", "--max-context",
                 str(MAX_CONTEXT), *compile_args("arm64"), "--quant=none",
                 "--kv-cache=" + cache])
            logits = {}
            for cpu in ("max", "cortex-a53"):
                path = os.path.join(out, "logits-%s.npy" % cpu)
                run(runner(out, "arm64", cpu=cpu) + [
                    "--prompt-ids", ",".join(map(str, prompt)), "--n-predict", "8",
                    "--chunk", "16", "--threads", "2", "--logits-out", path])
                logits[cpu] = np.load(path)
            error = logits["max"] - logits["cortex-a53"]
            snr = 10 * np.log10((logits["cortex-a53"] ** 2).sum() /
                                max((error ** 2).sum(), 1e-30))
            print("arm64 attention, %s caches, vs Halide: logits SNR %.1f dB" % (cache, snr))
            self.assertGreaterEqual(snr, 100.0)

    def test_arm64_f16_caches_of_mini(self):
        # --kv-cache=f16: Halide's attention kernel reads the 16-bit caches
        # and the driver rounds what it writes (host: 70.3 dB).
        self.require("arm64")
        self.snr_of_build(["--kv-cache=f16"], "arm64-mini-kv-f16", 65.0, target="arm64")

    # Hexagon: f32 kernels run on the scalar core (v66 HVX has no float
    # lanes), int8 products on HVX (vrmpy: w8a8, w4a8, w4a16, w8a16).
    # Emulating the scalar f16 kernels is slow, so the f16 tests run 80
    # prompt tokens (the ring of 63 slots still wraps) and 8 generated
    # instead of 150 + 32.
    def test_hexagon_fp32_parity(self):
        self.require("hexagon")
        case = Case(self.tmp, "hexagon-mixed", target="hexagon")
        prompt = self.long_prompt(case, 9)  # wraps the sliding rings
        for chunk in (7, 64):
            self.assertFp32Parity(case, prompt, chunk=chunk)
        dispatch = run(runner(case.out, "hexagon") + ["--prompt-ids", "1", "--n-predict", "1",
                                                      "--print-dispatch"], stderr=True)
        self.assertIn("hexagon-hvx", dispatch)

    def test_hexagon_f16_build_of_mini(self):
        self.require("hexagon")
        self.snr_of_build(["--dtype=f16"], "hexagon-mini-f16", 45.0, target="hexagon",
                          prompt_length=80, n_predict=8)

    def test_hexagon_w8a16_build_of_mini(self):
        self.require("hexagon")
        self.snr_of_build(["--quant=w8a16"], "hexagon-mini-w8a16", 28.0, target="hexagon")

    def test_hexagon_w8a8_build_of_mini(self):
        # The vrmpy microkernel.
        self.require("hexagon")
        self.snr_of_build(["--quant=w8a8"], "hexagon-mini-w8a8", 22.0, target="hexagon")

    def test_hexagon_lane_conversions_are_exact(self):
        # vrmpy_linear.c turns lane sums and f16 scales into f32 on HVX (v66
        # has no float lanes): hexagon_lanes_test.c checks them against C's
        # conversion and the f16 fields, under qemu.
        self.require("hexagon")
        clang = "/usr/lib/llvm-22/bin/clang"
        halide = [d for d in ("/usr/include/halide14", "/usr/include")
                  if os.path.exists(os.path.join(d, "HalideRuntime.h"))]
        if not halide:
            print("[SKIP] HalideRuntime.h is not installed")
            self.skipTest("HalideRuntime.h is not installed")
        resource = run([clang, "-print-resource-dir"]).strip()
        source = test_e2e.SOURCE
        exe = os.path.join(self.tmp, "hexagon_lanes_test")
        run([clang, "--target=hexagon-unknown-none-elf", "-mv66", "-mhvx",
             "-mhvx-length=128B", "-O2", "-ffreestanding", "-fno-builtin", "-nostdinc",
             "-isystem", os.path.join(resource, "include"),
             "-isystem", os.path.join(source, "targets", "hexagon", "libc", "include"),
             "-I" + halide[0], "-I" + os.path.join(source, "runtime", "include"),
             "-I" + os.path.join(source, "targets", "common", "lib"),
             "-I" + os.path.join(source, "targets", "hexagon", "lib"),
             "-nostdlib", "-static", "-fuse-ld=lld", "--ld-path=/usr/lib/llvm-22/bin/ld.lld",
             os.path.join(source, "test", "e2e", "hexagon_lanes_test.c"),
             os.path.join(source, "targets", "hexagon", "libc", "freestanding.c"), "-o", exe])
        report = run(EMULATORS["hexagon"] + [exe])
        print(report.strip())
        self.assertIn(" 0 mismatches", report)

    def test_hexagon_w4a8_build_of_mini(self):
        # The 4-bit vrmpy rows in every product of the model.
        self.require("hexagon")
        self.snr_of_build(["--quant=w4a8"], "hexagon-mini-w4a8", 5.0, target="hexagon")

    def test_hexagon_four_bit_int8_input_rows_match_halide(self):
        # w4a8's vrmpy rows (two groups a vector pair, the lanes added
        # pairwise on HVX, the scales on the scalar core) and w6a8's (the
        # int6 head) against Halide's scalar kernels: five groups of 128 a
        # row, so a last half pair.
        self.assertHeadRowsMatchHalide("hexagon-wide-head4-a8", "w4a8", "int4",
                                       self.wide_checkpoint(), target="hexagon",
                                       prompts=(12, 1))
        self.assertHeadRowsMatchHalide("hexagon-wide-head6-a8", "w4a8", "int6",
                                       self.wide_checkpoint(), target="hexagon",
                                       prompts=(12, 1))

    def test_hexagon_sixteen_bit_input_rows_match_halide(self):
        # w4a16's and w8a16's vrmpy rows (f16 inputs, the hexagon default,
        # and bf16, as int16 split into bytes: high bytes x the codes, low
        # bytes x the codes, high x 256 + low) against Halide's scalar
        # kernels.
        wide = self.wide_checkpoint()
        # A 12-token prompt (prefill) and a 1-token one: Halide's scalar
        # kernels are slow under qemu.
        self.assertHeadRowsMatchHalide("hexagon-wide-head4-a16", "w4a16", "int4", wide,
                                       target="hexagon", prompts=(12, 1))
        self.assertHeadRowsMatchHalide("hexagon-wide-head8-a16", "w8a16", "int8", wide,
                                       target="hexagon", prompts=(12, 1))
        # The 6-bit head (the int6 recipe rule): the 4-bit rows with the top
        # bits beside the nibbles; five groups of 128, so the last pair's
        # tops are half past the row.
        self.assertHeadRowsMatchHalide("hexagon-wide-head6-a16", "w4a16", "int6", wide,
                                       target="hexagon", prompts=(12, 1))
        # bf16 (its rounding; the rows are f16's): decode only.
        self.assertHeadRowsMatchHalide("hexagon-wide-head4-bf16", "w4a16", "int4", wide,
                                       ["--activations=bf16"], target="hexagon",
                                       prompts=(1,))

    def test_hexagon_w4a16_build_of_mini(self):
        # The 16-bit-input vrmpy rows in every product of the model.
        self.require("hexagon")
        self.snr_of_build(["--quant=w4a16"], "hexagon-mini-w4a16", 5.0, target="hexagon")

    def test_hexagon_six_bit_head_of_mini(self):
        self.require("hexagon")
        # The kernels, not the rings: 24 prompt tokens and 4 generated.
        self.snr_of_build(self.SIX_BIT_HEAD, "hexagon-mini-head6", 80.0, target="hexagon",
                          prompt_length=24, n_predict=4, ckpt=self.six_bit_head_checkpoint())

    def test_hexagon_bf16_caches_of_mini(self):
        # --kv-cache=bf16 on the freestanding runtime (host: 52.1 dB over 150
        # prompt tokens).
        self.require("hexagon")
        self.snr_of_build(["--kv-cache=bf16"], "hexagon-mini-kv-bf16", 48.0,
                          target="hexagon", prompt_length=80, n_predict=8)

    # A host build on an x86-64 CPU without AVX-512 (qemu's `max` CPU): the
    # driver picks the avx2 variant from CPUID, and nothing it runs may use
    # AVX-512 (an AVX-512 kernel in that variant would raise SIGILL).
    def test_x86_avx2_fp32_parity(self):
        self.require("x86-avx2")
        case = Case(self.tmp, "x86-avx2-mixed", target="x86-avx2")
        dispatch = run(runner(case.out, "x86-avx2") + ["--prompt-ids", "1", "--n-predict",
                                                       "1", "--print-dispatch"], stderr=True)
        self.assertIn("x86-avx2", dispatch)
        prompt = self.long_prompt(case, 10)  # wraps the sliding rings
        for chunk in (7, 64):
            self.assertFp32Parity(case, prompt, chunk=chunk)

    def test_x86_avx2_quantized_builds_of_mini(self):
        # The AVX2 matrix kernels of every scheme: the host's floors, on 80
        # prompt tokens (prefill tiles and remainders; the ring of 63 slots
        # still wraps) and 8 generated (the one-token rows), as emulation is
        # slow.
        self.require("x86-avx2")
        for scheme, floor in (("w8a16", 28.0), ("w8a8", 22.0), ("w4a16", 5.0),
                              ("w4a8", 5.0)):
            self.snr_of_build(["--quant=" + scheme], "x86-avx2-mini-" + scheme, floor,
                              target="x86-avx2", prompt_length=80, n_predict=8)


if __name__ == "__main__":
    unittest.main()
