"""Tests of the float64 reference (tools/reference/spark_reference.py).

Checkpoints come from the real generator (spark-mkmodel, found through
SPARK_BIN_DIR); layout variants are rewritten from its tensors with the
reference's own safetensors writer.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
import spark_reference as ref  # noqa: E402

BIN = os.environ.get("SPARK_BIN_DIR", os.path.join(HERE, "..", "..", "build", "bin"))


def make_model(directory, *args):
    subprocess.run([os.path.join(BIN, "spark-mkmodel"), "-o", directory, "--dtype", "f32",
                    *args], check=True, stdout=subprocess.DEVNULL)
    return directory


class ReferenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="spark-ref-")
        cls.tiny = make_model(os.path.join(cls.tmp, "tiny"), "--preset", "tiny", "--seed", "7")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def tokens(self, n, vocab=64, seed=0):
        return list(np.random.default_rng(seed).integers(0, vocab, n))

    def test_incremental_equals_full(self):
        model = ref.Model(self.tiny)
        # 3 x the window so sliding layers drop keys during the prompt.
        tokens = self.tokens(3 * model.W + 5)
        full = model.logits(tokens)
        for chunk in (1, 3, 7):
            cache, rows = model.new_cache(), []
            for i in range(0, len(tokens), chunk):
                rows.append(model.forward(tokens[i:i + chunk], i, cache))
            np.testing.assert_allclose(np.concatenate(rows), full, rtol=0, atol=1e-9,
                                       err_msg="chunk %d" % chunk)

    def test_generate_rows_match_full_evaluation(self):
        model = ref.Model(self.tiny)
        prompt = self.tokens(12, seed=1)
        generated, rows = model.generate(prompt, 6, chunk=5)
        self.assertEqual(rows.shape, (12 + 6 - 1, 64))
        full = model.logits(prompt + generated[:-1])
        np.testing.assert_allclose(rows, full, rtol=0, atol=1e-9)
        self.assertEqual(generated, [int(np.argmax(r)) for r in full[11:]])

    def test_sliding_layer_never_looks_further_back_than_window(self):
        one = make_model(os.path.join(self.tmp, "one-sliding"), "--preset", "tiny",
                         "--layer-types", "s", "--seed", "3")
        model = ref.Model(one)
        W = model.W
        tokens = self.tokens(2 * W + 3, seed=2)
        p = len(tokens) - 1
        base = model.logits(tokens)[p]
        outside = list(tokens)
        outside[p - W] = (outside[p - W] + 1) % 64  # key p - W is out of the window
        np.testing.assert_array_equal(model.logits(outside)[p], base)
        inside = list(tokens)
        inside[p - W + 1] = (inside[p - W + 1] + 1) % 64  # oldest visible key
        self.assertGreater(np.abs(model.logits(inside)[p] - base).max(), 1e-6)

    def test_full_layer_sees_the_first_token(self):
        one = make_model(os.path.join(self.tmp, "one-full"), "--preset", "tiny",
                         "--layer-types", "f", "--seed", "3")
        model = ref.Model(one)
        tokens = self.tokens(3 * model.W, seed=4)
        changed = list(tokens)
        changed[0] = (changed[0] + 1) % 64
        diff = np.abs(model.logits(changed)[-1] - model.logits(tokens)[-1]).max()
        self.assertGreater(diff, 1e-6)

    def test_layout_variants_compute_the_same_function(self):
        weights = ref.load_weights(self.tiny)
        with open(os.path.join(self.tiny, "config.json")) as f:
            config = json.load(f)
        q = config["num_attention_heads"] * config["head_dim"]
        kv = config["num_key_value_heads"] * config["head_dim"]
        variant = {}
        for name, w in weights.items():
            if name.endswith("q_k_v_proj.weight"):
                p = name[:-len("q_k_v_proj.weight")]
                variant[p + "q_proj.weight"] = w[:q]
                variant[p + "k_proj.weight"] = w[q:q + kv]
                variant[p + "v_proj.weight"] = w[q + kv:]
            elif name.endswith("mlp.gate_proj.weight"):
                p = name[:-len("gate_proj.weight")]
                variant[p + "gate_up_proj.weight"] = np.concatenate(
                    [w, weights[p + "up_proj.weight"]])
            elif not name.endswith("mlp.up_proj.weight"):
                variant[name] = w
        out = os.path.join(self.tmp, "variant")
        os.makedirs(out)
        shutil.copy(os.path.join(self.tiny, "config.json"), out)
        ref.write_safetensors(os.path.join(out, "model.safetensors"), variant)
        tokens = self.tokens(20, seed=5)
        np.testing.assert_array_equal(ref.Model(out).logits(tokens),
                                      ref.Model(self.tiny).logits(tokens))

    def test_rope_rotates_only_the_rotary_dims(self):
        x = np.random.default_rng(6).standard_normal((3, 2, 8))
        out = ref.Model.rope(x, np.array([0, 5, 9]), 10000.0, 4)
        np.testing.assert_array_equal(out[..., 4:], x[..., 4:])
        np.testing.assert_array_equal(out[0], x[0])  # position 0: no rotation
        np.testing.assert_allclose(np.linalg.norm(out[..., :2] ** 2 + out[..., 2:4] ** 2),
                                   np.linalg.norm(x[..., :2] ** 2 + x[..., 2:4] ** 2))
        # Pair (i, i + rd/2) at position 5, i = 0: angle 5 * theta^0 = 5 rad.
        c, s = np.cos(5.0), np.sin(5.0)
        np.testing.assert_allclose(out[1, :, 0], x[1, :, 0] * c - x[1, :, 2] * s)
        np.testing.assert_allclose(out[1, :, 2], x[1, :, 2] * c + x[1, :, 0] * s)

    def test_generated_logits_are_not_an_echo_of_the_input(self):
        model = ref.Model(self.tiny)
        tokens = self.tokens(64, seed=8)
        argmax = model.logits(tokens).argmax(axis=1)
        self.assertLess(np.mean(argmax == np.array(tokens)), 0.2)
        self.assertGreater(len(set(argmax.tolist())), 16)

    def test_cli_writes_logits_rows(self):
        out = os.path.join(self.tmp, "logits.npy")
        result = subprocess.run(
            [sys.executable, os.path.join(HERE, "..", "..", "tools", "reference",
                                          "spark_reference.py"),
             self.tiny, "--prompt-ids", "1,2,3", "--n-predict", "4", "--logits-out", out],
            check=True, capture_output=True, text=True)
        generated = [int(t) for t in result.stdout.split()]
        rows = np.load(out)
        self.assertEqual(rows.shape, (3 + 4 - 1, 64))
        self.assertEqual(rows.dtype, np.float32)
        self.assertEqual(generated, [int(np.argmax(r)) for r in rows[2:]])


if __name__ == "__main__":
    unittest.main()
