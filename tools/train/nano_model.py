"""Spark-X2.5's function (shared/spec/spark2_5.md section 3) as a PyTorch module,
with Hugging Face tensor names, for training spark-nano.

The forward pass evaluates a whole sequence at once: the sliding window is a mask
(p - W < m <= p), as in the float64 reference, and RoPE is computed from the
layer type's theta and partial factor."""

import math

import torch
import torch.nn.functional as F
from torch import nn


def layer_types(config):
    n = config["num_hidden_layers"]
    return config.get("layer_types") or [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(positions, head_dim, theta, factor):
    rd = int(head_dim * factor)
    inv_freq = theta ** (-torch.arange(0, rd // 2, dtype=torch.float64) * 2.0 / rd)
    angles = positions.double()[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float(), rd


def apply_rope(x, cos, sin, rd):
    """x: [B, heads, T, hd]; rotate-half on the first rd dims."""
    half = rd // 2
    x1, x2, rest = x[..., :half], x[..., half:rd], x[..., rd:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        d, hd = config["hidden_size"], config["head_dim"]
        self.h, self.kv, self.hd = config["num_attention_heads"], config["num_key_value_heads"], hd
        self.q_k_v_proj = nn.Linear(d, (self.h + 2 * self.kv) * hd, bias=False)
        self.g_proj = nn.Linear(d, self.h, bias=False)
        self.out_proj = nn.Linear(self.h * hd, d, bias=False)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        d, i = config["hidden_size"], config["intermediate_size"]
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)


class Layer(nn.Module):
    def __init__(self, config, kind):
        super().__init__()
        eps = config["rms_norm_eps"]
        self.kind = kind
        self.input_layernorm = RMSNorm(config["hidden_size"], eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config["hidden_size"], eps)
        self.mlp = MLP(config)


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embedding = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList(Layer(config, k) for k in layer_types(config))
        self.norm = RMSNorm(config["hidden_size"], config["rms_norm_eps"])


class SparkForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = Model(config)

    def init_weights(self, generator):
        std = 0.02
        n = len(self.model.layers)
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                continue
            scale = std / math.sqrt(2 * n) if name.endswith(("out_proj.weight", "down_proj.weight")) else std
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=generator) * scale)

    def forward(self, ids):
        """ids: [B, T] token ids at positions 0..T-1; returns logits [B, T, V] (f32)."""
        cfg = self.config
        B, T = ids.shape
        H, KV, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        W = cfg["sliding_window"]
        pos = torch.arange(T)
        causal = pos[None, :] <= pos[:, None]
        masks = {"full_attention": causal,
                 "sliding_attention": causal & (pos[None, :] > pos[:, None] - W)}
        ropes = {}
        for kind, params in cfg["rope_parameters"].items():
            ropes[kind] = rope_tables(pos, hd, params["rope_theta"], params["partial_rotary_factor"])
        h = self.model.embedding(ids)
        for layer in self.model.layers:
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            qkv = attn.q_k_v_proj(x)
            q = qkv[..., :H * hd].view(B, T, H, hd).transpose(1, 2)
            k = qkv[..., H * hd:(H + KV) * hd].view(B, T, KV, hd).transpose(1, 2)
            v = qkv[..., (H + KV) * hd:].view(B, T, KV, hd).transpose(1, 2)
            cos, sin, rd = ropes[layer.kind]
            q, k = apply_rope(q, cos, sin, rd), apply_rope(k, cos, sin, rd)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            s = s.masked_fill(~masks[layer.kind], float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            if cfg.get("headwise_attn_output_gate", True):
                o = o * torch.sigmoid(attn.g_proj(x)).transpose(1, 2)[..., None]
            h = h + attn.out_proj(o.transpose(1, 2).reshape(B, T, H * hd))
            x2 = layer.post_attention_layernorm(h)
            mlp = layer.mlp
            h = h + mlp.down_proj(F.gelu(mlp.gate_proj(x2)) * mlp.up_proj(x2))
        return self.model.norm(h) @ self.model.embedding.weight.t()

    def checkpoint_tensors(self):
        """{Hugging Face name: f32 tensor}, the layout of spark2_5.md section 2."""
        out = {}
        for name, p in self.state_dict().items():
            out[name] = p.detach().float().contiguous()
        return out
