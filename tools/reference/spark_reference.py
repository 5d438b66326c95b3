#!/usr/bin/env python3
"""Float64 NumPy reference of the Spark-X2.5 function (spec section 3).

The oracle for end-to-end tests: it reads a checkpoint directory on its own
(its own safetensors parser, no code shared with the compiler), keeps the
whole key/value history and applies the sliding window as a mask, so it
shares no design decision with the compiled ring-buffer caches.

    spark_reference.py CKPT --prompt-ids 1,2,3 --n-predict 8 [--logits-out F.npy]

prints the greedy continuation; --logits-out writes float32 logits
[P + N - 1, vocab]: one row per evaluated position (every prompt position
and every generated token fed back), the format spark-run writes.
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U8": np.uint8}


def read_safetensors(path):
    """Returns {name: float64 array} of one safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = np.frombuffer(data, dtype=_DTYPES[info["dtype"]],
                            count=(end - begin) // np.dtype(_DTYPES[info["dtype"]]).itemsize,
                            offset=base + begin)
        if info["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = raw.astype(np.float64).reshape(info["shape"])
    return tensors


def write_safetensors(path, tensors, dtype="F32"):
    """Writes {name: array} as one safetensors file (tests use it to build
    layout variants of a checkpoint): arrays of uint8 or float16 as U8 or
    F16, every other one as `dtype`."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        kind = {np.dtype(np.uint8): "U8", np.dtype(np.float16): "F16"}.get(
            np.asarray(array).dtype, dtype)
        if kind == "BF16":
            bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
            blob = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        else:
            blob = np.ascontiguousarray(array, dtype=_DTYPES[kind]).tobytes()
        header[name] = {"dtype": kind, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def write_checkpoint(ckpt, out, tensors, extra=None):
    """A checkpoint folder `out` holding CKPT's files but its safetensors
    (config, tokenizer, ...), `tensors` as model.safetensors
    (write_safetensors: F32, U8 and F16 arrays as such) and `extra`
    ({file name: text}); written in a temporary folder beside `out` and
    renamed, so that no half-written `out` is ever left."""
    parent = os.path.dirname(os.path.abspath(out))
    tmp = tempfile.mkdtemp(prefix=".checkpoint-", dir=parent)
    try:
        for entry in os.listdir(ckpt):
            src = os.path.join(ckpt, entry)
            if (os.path.isfile(src) and not entry.endswith(".safetensors")
                    and entry != "model.safetensors.index.json"):
                shutil.copy(src, tmp)
        write_safetensors(os.path.join(tmp, "model.safetensors"), tensors)
        for name, text in (extra or {}).items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_weights(ckpt_dir):
    index_path = os.path.join(ckpt_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    weights = {}
    for shard in shards:
        weights.update(read_safetensors(os.path.join(ckpt_dir, shard)))
    return weights


def normalize_config(raw):
    """Applies the spec's defaults (section 1)."""
    if raw.get("model_type") != "spark2_5":
        raise ValueError("model_type must be spark2_5, got %r" % raw.get("model_type"))
    c = dict(raw)
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    c.setdefault("rms_norm_eps", 1e-6)
    c.setdefault("tie_word_embeddings", True)
    c.setdefault("headwise_attn_output_gate", True)
    n = c["num_hidden_layers"]
    if "layer_types" not in c:
        c["layer_types"] = ["sliding_attention" if (i + 1) % 4 != 0 else "full_attention"
                            for i in range(n)]
    if "rope_parameters" not in c:
        shared = {"rope_theta": c["rope_theta"],
                  "partial_rotary_factor": c.get("partial_rotary_factor", 1.0)}
        c["rope_parameters"] = {"sliding_attention": shared, "full_attention": shared}
    return c


class Layer:
    pass


class Model:
    """The spec's function in float64."""

    def __init__(self, ckpt_dir):
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            self.config = c = normalize_config(json.load(f))
        w = load_weights(ckpt_dir)
        self.d, self.hd = c["hidden_size"], c["head_dim"]
        self.H, self.KV = c["num_attention_heads"], c["num_key_value_heads"]
        self.W, self.eps = c["sliding_window"], c["rms_norm_eps"]
        self.embedding = w["model.embedding.weight"]
        self.final_norm = w["model.norm.weight"]
        self.head = self.embedding if c["tie_word_embeddings"] else w["lm_head.weight"]
        q, kv = self.H * self.hd, self.KV * self.hd
        self.layers = []
        for i, kind in enumerate(c["layer_types"]):
            p = "model.layers.%d." % i
            L = Layer()
            L.kind = kind
            rope = c["rope_parameters"][kind]
            L.theta = rope["rope_theta"]
            L.rd = int(round(self.hd * rope.get("partial_rotary_factor", 1.0)))
            L.input_norm = w[p + "input_layernorm.weight"]
            L.post_norm = w[p + "post_attention_layernorm.weight"]
            if p + "self_attn.q_k_v_proj.weight" in w:
                qkv = w[p + "self_attn.q_k_v_proj.weight"]
                L.wq, L.wk, L.wv = qkv[:q], qkv[q:q + kv], qkv[q + kv:]
            else:
                L.wq = w[p + "self_attn.q_proj.weight"]
                L.wk = w[p + "self_attn.k_proj.weight"]
                L.wv = w[p + "self_attn.v_proj.weight"]
            L.wg = w.get(p + "self_attn.g_proj.weight") if c["headwise_attn_output_gate"] else None
            L.wo = w[p + "self_attn.out_proj.weight"]
            if p + "mlp.gate_up_proj.weight" in w:
                gu = w[p + "mlp.gate_up_proj.weight"]
                inter = gu.shape[0] // 2
                L.wgate, L.wup = gu[:inter], gu[inter:]
            else:
                L.wgate = w[p + "mlp.gate_proj.weight"]
                L.wup = w[p + "mlp.up_proj.weight"]
            L.wdown = w[p + "mlp.down_proj.weight"]
            self.layers.append(L)

    def new_cache(self):
        """Per layer: all keys and values so far, [positions, KV, hd]."""
        empty = np.zeros((0, self.KV, self.hd))
        return [[empty, empty] for _ in self.layers]

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    @staticmethod
    def rope(x, positions, theta, rd):
        """x: [n, heads, hd]; NeoX rotate-half on the first rd dims."""
        half = rd // 2
        inv_freq = theta ** (-2.0 * np.arange(half) / rd)
        angle = positions[:, None].astype(np.float64) * inv_freq[None, :]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        out = x.copy()
        x1, x2 = x[..., :half], x[..., half:rd]
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half:rd] = x2 * cos + x1 * sin
        return out

    def forward(self, tokens, start, cache):
        """Evaluates tokens at positions start..start+n-1, extending cache in
        place. Returns logits [n, vocab]."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        positions = np.arange(start, start + n)
        h = self.embedding[tokens]
        group = self.H // self.KV
        # observe(layer, role, x): the inputs of the matrix products, for
        # calibration checks (roles attn_in, attn_out, mlp_in, mlp_mid;
        # head_in with layer None).
        see = getattr(self, "observe", None) or (lambda layer, role, x: None)
        for i, (L, layer_cache) in enumerate(zip(self.layers, cache)):
            x = self.rmsnorm(h, L.input_norm)
            see(i, "attn_in", x)
            q = (x @ L.wq.T).reshape(n, self.H, self.hd)
            k = (x @ L.wk.T).reshape(n, self.KV, self.hd)
            v = (x @ L.wv.T).reshape(n, self.KV, self.hd)
            q = self.rope(q, positions, L.theta, L.rd)
            k = self.rope(k, positions, L.theta, L.rd)
            assert layer_cache[0].shape[0] == start, "cache does not end at start"
            keys = np.concatenate([layer_cache[0], k])
            values = np.concatenate([layer_cache[1], v])
            layer_cache[0], layer_cache[1] = keys, values
            m = np.arange(keys.shape[0])
            visible = m[None, :] <= positions[:, None]
            if L.kind == "sliding_attention":
                visible &= m[None, :] > positions[:, None] - self.W
            o = np.empty((n, self.H, self.hd))
            for j in range(self.H):
                kvh = j // group
                s = q[:, j, :] @ keys[:, kvh, :].T / math.sqrt(self.hd)
                s = np.where(visible, s, -np.inf)
                s -= s.max(axis=1, keepdims=True)
                p = np.exp(s)
                p /= p.sum(axis=1, keepdims=True)
                o[:, j, :] = p @ values[:, kvh, :]
            if L.wg is not None:
                g = 1.0 / (1.0 + np.exp(-(x @ L.wg.T)))
                o *= g[:, :, None]
            see(i, "attn_out", o.reshape(n, self.H * self.hd))
            h = h + o.reshape(n, self.H * self.hd) @ L.wo.T
            x2 = self.rmsnorm(h, L.post_norm)
            see(i, "mlp_in", x2)
            z = x2 @ L.wgate.T
            gelu = 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))
            see(i, "mlp_mid", gelu * (x2 @ L.wup.T))
            h = h + (gelu * (x2 @ L.wup.T)) @ L.wdown.T
        final = self.rmsnorm(h, self.final_norm)
        see(None, "head_in", final)
        return final @ self.head.T

    def logits(self, tokens):
        """Logits of every position of tokens, evaluated in one chunk."""
        return self.forward(tokens, 0, self.new_cache())

    def generate(self, prompt, n_predict, chunk=None):
        """Greedy continuation. Returns (generated ids, logits rows
        [P + n_predict - 1, vocab])."""
        cache = self.new_cache()
        rows, pos = [], 0
        chunk = chunk or len(prompt)
        for i in range(0, len(prompt), chunk):
            piece = prompt[i:i + chunk]
            rows.append(self.forward(piece, pos, cache))
            pos += len(piece)
        generated = []
        for step in range(n_predict):
            next_id = int(np.argmax(rows[-1][-1]))
            generated.append(next_id)
            if step + 1 < n_predict:
                rows.append(self.forward([next_id], pos, cache))
                pos += 1
        return generated, np.concatenate(rows)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--prompt-ids", required=True,
                        help="comma-separated token ids")
    parser.add_argument("--n-predict", type=int, default=16)
    parser.add_argument("--chunk", type=int, default=0,
                        help="prefill chunk size (0: whole prompt)")
    parser.add_argument("--logits-out", help="write float32 logits as .npy")
    args = parser.parse_args(argv)
    try:
        prompt = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
    except ValueError:
        parser.error("--prompt-ids: expected comma-separated integers")
    if not prompt:
        parser.error("--prompt-ids: need at least one token")
    if args.n_predict < 1:
        parser.error("--n-predict: must be at least 1")
    model = Model(args.checkpoint)
    vocab = model.embedding.shape[0]
    bad = [t for t in prompt if not 0 <= t < vocab]
    if bad:
        parser.error("--prompt-ids: token %d is outside the vocabulary [0, %d)" % (bad[0], vocab))
    generated, rows = model.generate(prompt, args.n_predict, args.chunk or None)
    print(" ".join(str(t) for t in generated))
    if args.logits_out:
        tmp = args.logits_out + ".partial.npy"
        np.save(tmp, rows.astype(np.float32))
        os.replace(tmp, args.logits_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
