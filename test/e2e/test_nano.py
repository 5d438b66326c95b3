"""spark-nano: the trained miniature of Spark (models/spark-nano) through every
quantization scheme, judged the way llama.cpp judges quantizations: KL
divergence of each build's next-token distribution from the f32 build's, on the
model's held-out text (spark-perplexity).

Each case compiles real builds (Halide objects, the generated driver) and runs
them in real processes. The bounds are the issue's goals where they are met,
and comparisons that lock the measured figures (docs/quantization.md) where a
goal is not met, so a regression fails either way.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SPARK_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BIN = os.environ.get("SPARK_BIN_DIR", os.path.join(SOURCE, "build", "bin"))
# A sanitized build (scripts/sanitize.sh) compiles with the main build.
COMPILER_BIN = os.environ.get("SPARK_COMPILER_DIR", BIN)
NANO = os.environ.get("SPARK_NANO_DIR", os.path.join(SOURCE, "models", "spark-nano"))
TEXT = os.path.join(NANO, "heldout-text.ids")
AGENT = os.path.join(NANO, "heldout-agent.ids")
CALIB = os.path.join(NANO, "calib.ids")
CALIB_32K = os.path.join(NANO, "calib-32k.ids")
sys.path.insert(0, os.path.join(SOURCE, "tools", "reference"))
import spark_reference as ref  # noqa: E402


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(args), result.returncode,
                                                        result.stdout, result.stderr))
    return result.stdout


class SparkNano(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="spark-nano-test-")
        # ctest compiles the f32 build once for all cases (nano/f32_build).
        shared = os.environ.get("SPARK_NANO_F32_BUILD")
        if shared and os.path.exists(os.path.join(shared, "manifest.json")):
            cls.f32 = shared
        else:
            cls.f32 = cls.compile("f32", [])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def compile(cls, name, flags, ckpt=NANO):
        out = os.path.join(cls.work, name)
        run([os.path.join(COMPILER_BIN, "spark-compile"), ckpt, "-o", out, "--quiet"] + flags)
        return out

    def measure(self, build, data=TEXT):
        path = os.path.join(self.work, "ppl-%s-%s.json" % (os.path.basename(build),
                                                           os.path.basename(data)))
        run([os.path.join(BIN, "spark-perplexity"), build, "--data", data, "--reference",
             self.f32, "--json", path, "--quiet"])
        with open(path) as f:
            result = json.load(f)
        print("%s on %s: PPL %.3f (f32 %.3f), mean KLD %.5f, same top %.2f%%" % (
            os.path.basename(build), os.path.basename(data), result["perplexity"],
            result["reference_perplexity"], result["kld"]["mean"], 100 * result["same_top"]))
        return result

    def test_torch_forward_matches_reference(self):
        """The training script's own PyTorch model and the float64 reference
        compute the same function on the committed checkpoint."""
        try:
            import torch
        except ImportError:
            print("[SKIP] python3-torch is not installed (scripts/install-deps.sh installs it)")
            return
        sys.path.insert(0, os.path.join(SOURCE, "tools", "train"))
        from nano_model import SparkForCausalLM
        with open(os.path.join(NANO, "config.json")) as f:
            config = json.load(f)
        model = SparkForCausalLM(config)
        weights = ref.load_weights(NANO)
        state = {name: torch.tensor(value, dtype=torch.float32) for name, value in weights.items()}
        model.load_state_dict(state)
        with open(AGENT) as f:
            ids = [int(t) for t in f.readline().split()][:300]
        with torch.no_grad():
            ours = model(torch.tensor([ids]))[0].double().numpy()
        truth = ref.Model(NANO).logits(ids)
        scale = np.abs(truth).max()
        err = np.abs(ours - truth).max()
        print("max |torch - reference| = %.3g of max |logit| %.3g" % (err, scale))
        self.assertLess(err, 2e-4 * scale)

    def test_f32_perplexity_is_the_trained_models(self):
        """The f32 build's held-out perplexity is the one training measured
        (bf16-stored weights: within 1%)."""
        with open(os.path.join(NANO, "training.json")) as f:
            trained = json.load(f)
        result = self.measure(self.f32)
        self.assertEqual(result["kld"]["max"], 0.0)
        expected = math.exp(trained["heldout_text_loss"])
        self.assertLess(abs(result["perplexity"] / expected - 1), 0.01)

    def test_w8a16(self):
        r = self.measure(self.compile("w8a16", ["--quant=w8a16"]))
        self.assertLessEqual(r["kld"]["mean"], 0.005)
        self.assertGreaterEqual(r["same_top"], 0.97)

    def test_w8a8_dynamic(self):
        r = self.measure(self.compile("w8a8", ["--quant=w8a8"]))
        self.assertLessEqual(r["kld"]["mean"], 0.02)

    def test_w8a8_static(self):
        r = self.measure(self.compile("w8a8s", ["--quant=w8a8", "--calib", CALIB,
                                                 "--activations=static"]))
        self.assertLessEqual(r["kld"]["mean"], 0.02)

    def test_w4a16_against_q4_0_emulation(self):
        """w4a16 in groups of 64 (4.53 bits per weight) against llama.cpp's
        Q4_0 at 4.5 bits (round-to-nearest emulation, every matrix Q4_0).
        The issue's goal, 0.6x the KLD of Q4_0 at <= 4.6 bits, is not met
        (measured 0.88x); this locks the measured advantage."""
        ours = self.compile("w4a16", ["--quant=w4a16", "--group-size=64"])
        with open(os.path.join(ours, "manifest.json")) as f:
            bits = json.load(f)["bits_per_weight"]
        self.assertLessEqual(bits, 4.6)
        emulated = os.path.join(self.work, "ckpt-q4_0")
        run([sys.executable, os.path.join(SOURCE, "tools", "reference", "llama_quant_emulation.py"),
             NANO, "--type", "q4_0", "--head", "same", "-o", emulated])
        q4_0 = self.measure(self.compile("q4_0", [], ckpt=emulated))
        r = self.measure(ours)
        print("w4a16 g64 / Q4_0 mean KLD: %.3f" % (r["kld"]["mean"] / q4_0["kld"]["mean"]))
        self.assertLessEqual(r["kld"]["mean"], 0.95 * q4_0["kld"]["mean"])

    def test_w4a8_against_w4a16(self):
        """w4a8: mean KLD at most 2x w4a16's (same groups of 64)."""
        w4a16 = self.measure(self.compile("w4a16", ["--quant=w4a16", "--group-size=64"]))
        r = self.measure(self.compile("w4a8", ["--quant=w4a8", "--group-size=64"]))
        print("w4a8 / w4a16 mean KLD: %.3f" % (r["kld"]["mean"] / w4a16["kld"]["mean"]))
        self.assertLessEqual(r["kld"]["mean"], 2.0 * w4a16["kld"]["mean"])

    def test_head_precision_recipe(self):
        """The recipe that keeps the tied head at 8 bits cuts w4a16's KLD by
        more than half (measured 0.00654 -> 0.00202 at groups of 128)."""
        plain = self.measure(self.compile("w4a16-128", ["--quant=w4a16"]))
        mixed = self.measure(self.compile("w4a16-head8", [
            "--quant=w4a16", "--quant-override=model.embedding.weight=int8"]))
        self.assertLess(mixed["kld"]["mean"], 0.5 * plain["kld"]["mean"])

    def test_head_six_bits(self):
        """The tied head in 6-bit groups of 128 (int6: 6.25 bits per head
        weight) costs a third of a bit per weight and cuts the KLD of w4a16
        (measured 0.00654 -> 0.00223, 4.57 bits per weight) and of w4a8
        (0.00808 -> 0.00295, with the head's int8 inputs) by more than half."""
        for scheme in ("w4a16", "w4a8"):
            plain = self.measure(self.compile(scheme + "-128", ["--quant=" + scheme]))
            six = self.compile(scheme + "-head6", [
                "--quant=" + scheme, "--quant-override=model.embedding.weight=int6"])
            with open(os.path.join(six, "manifest.json")) as f:
                manifest = json.load(f)
            self.assertEqual(manifest["matrices"]["model.embedding.weight"],
                             "int6 g128 asymmetric")
            self.assertLessEqual(manifest["bits_per_weight"], 4.6)
            r = self.measure(six)
            print("%s 6-bit head / 4-bit head mean KLD: %.3f" % (
                scheme, r["kld"]["mean"] / plain["kld"]["mean"]))
            self.assertLess(r["kld"]["mean"], 0.5 * plain["kld"]["mean"])

    def test_w4a16_goal_with_tuned_grids(self):
        """The issue's w4a16 goal: at most 4.6 bits per weight, at most 0.6x
        the KLD of llama.cpp's Q4_0 (round-to-nearest emulation, its Q6_K
        head: 0.00191 at 4.80 bits) and below Q4_K's (0.00136). Met by the
        body in 4-bit groups of 128 and the tied head in 6-bit ones, with the
        grids of the scale-tuning script stored as they are. The table's row
        tunes 400 steps (0.00079); this runs 150 (measured 0.00101, 0.53x
        Q4_0 and 0.74x Q4_K, on the development VM; 120 steps gave 0.00108,
        40 steps on calib.ids 0.00162) on one PyTorch thread: on the 2-core
        VM, two threads took 43 s for 25 steps of this small model, one 20 s
        (the whole case: 185 s, from 447 s beside another test)."""
        try:
            import torch  # noqa: F401
        except ImportError:
            print("[SKIP] python3-torch is not installed (scripts/install-deps.sh installs it)")
            return
        tuned = os.path.join(self.work, "ckpt-tuned-head6")
        run([sys.executable, os.path.join(SOURCE, "tools", "reference", "scale_tune_experiment.py"),
             NANO, "--calib", CALIB_32K, "-o", tuned, "--group", "128", "--head-group", "128",
             "--head-bits", "6", "--steps", "150", "--lr", "2e-3", "--tune-rest",
             "--tune-codes", "2e-2", "--threads", "1"])
        build = self.compile("w4a16-head6-tuned", [
            "--quant=w4a16", "--quant-override=model.embedding.weight=int6"], ckpt=tuned)
        with open(os.path.join(build, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["four_bit_rounding"], "from the checkpoint")
        self.assertEqual(manifest["matrices"]["model.embedding.weight"],
                         "int6 g128 asymmetric, grid from the checkpoint")
        self.assertLessEqual(manifest["bits_per_weight"], 4.6)
        emulated = {}
        for kind in ("q4_0", "q4_k"):
            ckpt = os.path.join(self.work, "ckpt-%s-llama" % kind)
            run([sys.executable, os.path.join(SOURCE, "tools", "reference",
                                              "llama_quant_emulation.py"),
                 NANO, "--type", kind, "--head", "llama", "-o", ckpt])
            with open(os.path.join(ckpt, "emulation.json")) as f:
                self.assertGreaterEqual(json.load(f)["bits_per_weight"], manifest["bits_per_weight"])
            emulated[kind] = self.measure(self.compile(kind, [], ckpt=ckpt))["kld"]["mean"]
        r = self.measure(build)["kld"]["mean"]
        print("tuned w4a16 / Q4_0 mean KLD: %.3f, / Q4_K: %.3f" % (
            r / emulated["q4_0"], r / emulated["q4_k"]))
        self.assertLessEqual(r, 0.6 * emulated["q4_0"])
        self.assertLess(r, emulated["q4_k"])

    def test_gptq(self):
        """GPTQ rounding (--gptq, calibrated on calib.ids) against each group's
        own best grid, w4a16 in groups of 128: the emulation measured 0.73x the
        KLD (tools/reference/gptq_experiment.py); the compiler's must at least
        take a tenth off, and say how it rounded in the manifest."""
        plain = self.measure(self.compile("w4a16-128", ["--quant=w4a16"]))
        gptq = self.compile("w4a16-gptq", ["--quant=w4a16", "--calib", CALIB, "--gptq"])
        with open(os.path.join(gptq, "manifest.json")) as f:
            self.assertEqual(json.load(f)["four_bit_rounding"], "gptq")
        r = self.measure(gptq)
        print("w4a16 GPTQ / plain mean KLD: %.3f" % (r["kld"]["mean"] / plain["kld"]["mean"]))
        self.assertLess(r["kld"]["mean"], 0.9 * plain["kld"]["mean"])

    def test_w8a8_activation_blocks(self):
        """One int8 scale per block of 32 inputs beats one per token
        (measured 0.00008 against 0.00020)."""
        r = self.measure(self.compile("w8a8b", ["--quant=w8a8", "--activation-block=32"]))
        per_token = self.measure(self.compile("w8a8", ["--quant=w8a8"]))
        self.assertLess(r["kld"]["mean"], per_token["kld"]["mean"])
        self.assertLessEqual(r["kld"]["mean"], 0.02)


    def agent_turns(self, count=4):
        """The first turn of held-out agent episodes: (user message, the call
        the episode expects)."""
        sys.path.insert(0, os.path.join(SOURCE, "tools", "train"))
        import nano_data
        turns = []
        for messages in nano_data.episodes(1_000_003, count, heldout=True):
            call = messages[1]["tool_calls"][0]["function"]
            turns.append((messages[0]["content"], call["name"], call["arguments"]))
        return nano_data.SYSTEM_PROMPT, turns

    def run_agent_turn(self, system, user, extra):
        result = subprocess.run(
            [os.path.join(BIN, "spark-run"), self.f32, "--system", system, "--tools",
             os.path.join(SOURCE, "models", "spark-nano", "agent-tools.json"), "--prompt", user,
             "--n-predict", "96"] + extra, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        calls = [line.split(" ", 4)[3:] for line in result.stderr.splitlines()
                 if line.startswith("spark-run: tool call: ")]
        recovered = [line for line in result.stderr.splitlines() if "recovered:" in line]
        return result.stdout, calls, recovered

    def test_agent_turn_through_text(self):
        """Text in, tool call out: spark-run renders the chat template with the
        system prompt and tools, tokenizes, generates, streams the text and
        parses the call. The trained model makes the held-out episodes' first
        call; with --grammar tools every answer is a well-formed call."""
        system, turns = self.agent_turns()
        right = 0
        for user, name, arguments in turns:
            text, calls, recovered = self.run_agent_turn(system, user, [])
            print("%r -> %s %s" % (user.splitlines()[0], calls, recovered))
            self.assertEqual(len(calls), 1, text)
            self.assertIn("<tool_call>", text)
            got = json.loads(calls[0][1])
            expected = {k: (int(v) if str(v).isdigit() else v) for k, v in arguments.items()}
            same = calls[0][0] == name and got == expected
            # Tapping an app on the home screen and opening it by name are
            # the same step.
            if name == "tap" and calls[0][0] == "open_app":
                line = "[%d] %s (app)" % (expected["index"], got.get("name"))
                same = line in user.splitlines()
            right += same
            text, calls, recovered = self.run_agent_turn(system, user, ["--grammar", "tools"])
            self.assertEqual(len(calls), 1, text)
            self.assertEqual(recovered, [], text)
        print("first calls as the episodes expect: %d of %d" % (right, len(turns)))
        self.assertGreaterEqual(right, len(turns) - 1)

    def test_chat_keeps_the_session(self):
        """--chat: each line is a user turn; later turns evaluate only their
        own tokens (the template's text of earlier turns is not re-read)."""
        result = subprocess.run(
            [os.path.join(BIN, "spark-run"), self.f32, "--chat", "--n-predict", "12"],
            input="Hello there\nWhat is in the news today?\nAnd tomorrow?\n",
            capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("reading the whole conversation again", result.stderr)
        self.assertEqual(result.stderr.count("> "), 4, result.stderr)  # 3 turns + the end
        self.assertGreaterEqual(len([l for l in result.stdout.splitlines() if l.strip()]), 2)

if __name__ == "__main__":
    unittest.main()
