"""Bundled capture examples in plain torch (no weights, no downloads, no torchvision, no
transformers): `gpt2-small`, `gpt2-xl`, `llama-7b`, `qwen2.5-1.5b`, `qwen2.5-3b`, `resnet50`,
and the small `mlp`, `tiny-transformer`, `convnet` of the tests. Each factory returns a
`g10fast.capture.Model`."""

from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

from g10fast.capture.model import Model, adamw


# ---------------------------------------------------------------------------------------------
# GPT-2 (pre-LN, learned positions, GELU-tanh MLP, tied head; dropout 0)


class GPT2Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, D))


class GPT2MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = GPT2Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = GPT2MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, d=768, heads=12, layers=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList(GPT2Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.h:
            x = b(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


def lm_loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten())


def _lm_inputs(batch, seq, vocab):
    def make():
        x = torch.zeros(batch, seq, dtype=torch.long)
        return (x,), torch.zeros(batch, seq, dtype=torch.long)

    return make


def gpt2(size="small", batch=8, seq_len=1024, dtype="bfloat16", optimizer="adamw"):
    d, heads, layers = {
        "small": (768, 12, 12),
        "medium": (1024, 16, 24),
        "large": (1280, 20, 36),
        "xl": (1600, 25, 48),
    }[size]
    return Model(
        f"gpt2-{size}",
        lambda: GPT2(50257, max(1024, seq_len), d, heads, layers),
        _lm_inputs(batch, seq_len, 50257),
        lm_loss,
        adamw(optimizer),
        batch,
        dtype,
        {"seq_len": seq_len, "family": "gpt2"},
    )


# ---------------------------------------------------------------------------------------------
# Llama (RMSNorm, rotary positions, SwiGLU, untied head)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        q, k, v = (
            p(x).view(B, T, self.h, D // self.h).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, D))


class LlamaMLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, f):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = LlamaAttention(d, heads)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = LlamaMLP(d, f)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab=32000, d=4096, heads=32, f=11008, layers=32, ctx=2048):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaBlock(d, heads, f) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        dh = d // heads
        self.register_buffer("cos", torch.ones(ctx, dh), persistent=False)
        self.register_buffer("sin", torch.zeros(ctx, dh), persistent=False)

    def forward(self, idx):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed_tokens(idx)
        for b in self.layers:
            x = b(x, cos, sin)
        return self.lm_head(self.norm(x))


def llama(size="7b", batch=4, seq_len=2048, dtype="bfloat16", optimizer="adamw"):
    vocab, d, heads, f, layers = {"7b": (32000, 4096, 32, 11008, 32), "13b": (32000, 5120, 40, 13824, 40)}[
        size
    ]
    return Model(
        f"llama-{size}",
        lambda: Llama(vocab, d, heads, f, layers, seq_len),
        _lm_inputs(batch, seq_len, vocab),
        lm_loss,
        adamw(optimizer),
        batch,
        dtype,
        {"seq_len": seq_len, "family": "llama"},
    )


# ---------------------------------------------------------------------------------------------
# Qwen2 / Qwen2.5 (transformers' models/qwen2/modeling_qwen2.py, written out): RMSNorm computed
# in fp32, rotary positions computed each forward from inv_freq, grouped-query attention with
# biases on q/k/v through SDPA, SwiGLU MLP, the output head tied to the embedding


class Qwen2RMSNorm(nn.Module):
    """transformers' Qwen2RMSNorm: the statistics in fp32, the weight applied in the input's
    dtype."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        dt = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dt)


class Qwen2RotaryEmbedding(nn.Module):
    """transformers' default rope: cos and sin of the positions times inv_freq, computed in
    fp32 in every forward and cast to the activations' dtype."""

    def __init__(self, dh, theta=1e6):
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, dh, 2, dtype=torch.float32) / dh)
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Qwen2Attention(nn.Module):
    """q/k/v with biases, o without; kv_heads key/value heads shared by heads/kv_heads query
    heads each. SDPA with enable_gqa=True: what transformers' sdpa attention runs when no
    padding mask is given (torch >= 2.5, `use_gqa_in_sdpa`): no repeated K/V copies."""

    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.h, self.kv, self.dh = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.dh, bias=True)
        self.k_proj = nn.Linear(d, kv_heads * self.dh, bias=True)
        self.v_proj = nn.Linear(d, kv_heads * self.dh, bias=True)
        self.o_proj = nn.Linear(heads * self.dh, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv, self.dh).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.h * self.dh))


class Qwen2DecoderLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, f, eps):
        super().__init__()
        self.input_layernorm = Qwen2RMSNorm(d, eps)
        self.self_attn = Qwen2Attention(d, heads, kv_heads)
        self.post_attention_layernorm = Qwen2RMSNorm(d, eps)
        self.mlp = LlamaMLP(d, f)  # gate/up/down without biases, SiLU: Qwen2MLP

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen2Model(nn.Module):
    def __init__(self, vocab, d, heads, kv_heads, f, layers, eps, theta):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Qwen2DecoderLayer(d, heads, kv_heads, f, eps) for _ in range(layers))
        self.norm = Qwen2RMSNorm(d, eps)
        self.rotary_emb = Qwen2RotaryEmbedding(d // heads, theta)

    def forward(self, idx):
        x = self.embed_tokens(idx)
        pos = torch.arange(idx.shape[1], device=idx.device).unsqueeze(0)
        cos, sin = self.rotary_emb(x, pos)
        for b in self.layers:
            x = b(x, cos, sin)
        return self.norm(x)


class Qwen2ForCausalLM(nn.Module):
    """Qwen2Model and the LM head; with tie (Qwen2.5 up to 3B: tie_word_embeddings) the head
    is the embedding matrix itself (one parameter, F.linear on it, as GPT2 above: a separate
    nn.Linear sharing the weight would be untied by `to_empty`)."""

    def __init__(
        self, vocab=151936, d=1536, heads=12, kv_heads=2, f=8960, layers=28, eps=1e-6, theta=1e6, tie=True
    ):
        super().__init__()
        self.model = Qwen2Model(vocab, d, heads, kv_heads, f, layers, eps, theta)
        self.lm_head = None if tie else nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        h = self.model(idx)
        if self.lm_head is None:
            return F.linear(h, self.model.embed_tokens.weight)
        return self.lm_head(h)


#: config.json of Qwen/Qwen2.5-1.5B and Qwen/Qwen2.5-3B (huggingface.co): vocab_size,
#: hidden_size, num_attention_heads, num_key_value_heads, intermediate_size,
#: num_hidden_layers, rms_norm_eps, rope_theta, tie_word_embeddings
QWEN25 = {
    "1.5b": (151936, 1536, 12, 2, 8960, 28, 1e-6, 1e6, True),
    "3b": (151936, 2048, 16, 2, 11008, 36, 1e-6, 1e6, True),
}


def qwen25(size="1.5b", batch=4, seq_len=512, dtype="bfloat16", optimizer="adamw", layers=None):
    """Qwen2.5-1.5B / -3B at the built-in models' default batch and sequence (4 x 512:
    DeepSpeed's ZenFlow fine-tuning runs, data/models/qwen2.5-*.toml); `layers` overrides the
    depth (the tests' reduced model)."""
    vocab, d, heads, kv, f, nl, eps, theta, tie = QWEN25[size]
    nl = nl if layers is None else layers
    return Model(
        f"qwen2.5-{size}",
        lambda: Qwen2ForCausalLM(vocab, d, heads, kv, f, nl, eps, theta, tie),
        _lm_inputs(batch, seq_len, vocab),
        lm_loss,
        adamw(optimizer),
        batch,
        dtype,
        {"seq_len": seq_len, "family": "llama"},
    )


def tiny_transformer(batch=2, seq_len=16, dtype="float32", optimizer="adamw"):
    """A 2-layer Llama-style LM (vocab 1000, d 64, 4 heads, ffn 172): the tests' transformer."""
    return Model(
        "tiny-transformer",
        lambda: Llama(1000, 64, 4, 172, 2, seq_len),
        _lm_inputs(batch, seq_len, 1000),
        lm_loss,
        adamw(optimizer),
        batch,
        dtype,
        {"seq_len": seq_len, "family": "llama"},
    )


# ---------------------------------------------------------------------------------------------
# ResNet-50 (torchvision's layout, written out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride=1):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != out:
            self.downsample = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + idt)


class ResNet(nn.Module):
    def __init__(self, blocks=(3, 4, 6, 3), classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for i, (n, planes) in enumerate(zip(blocks, (64, 128, 256, 512))):
            stage = []
            for j in range(n):
                stage.append(Bottleneck(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * 4
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _image_inputs(batch, hw, classes):
    def make():
        return (torch.zeros(batch, 3, hw, hw),), torch.zeros(batch, dtype=torch.long)

    return make


def resnet50(batch=64, image_size=224, dtype="float32", optimizer="sgd"):
    opt = "sgd-momentum" if optimizer == "sgd" else optimizer
    return Model(
        "resnet50",
        lambda: ResNet((3, 4, 6, 3)),
        _image_inputs(batch, image_size, 1000),
        F.cross_entropy,
        adamw(opt),
        batch,
        dtype,
        {"image_size": image_size},
    )


class ConvNet(nn.Module):
    """conv-BN-ReLU, max-pool, conv (with bias), global average, linear: the tests' conv net."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, 1, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(x.mean((2, 3)))


def convnet(batch=4, image_size=16, dtype="float32", optimizer="sgd"):
    opt = "sgd-momentum" if optimizer == "sgd" else optimizer
    return Model(
        "convnet",
        ConvNet,
        _image_inputs(batch, image_size, 10),
        F.cross_entropy,
        adamw(opt),
        batch,
        dtype,
        {"image_size": image_size},
    )


class MLP(nn.Module):
    def __init__(self, d=64, h=256, c=10):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, c)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def mlp(batch=32, dtype="float32", optimizer="adamw"):
    def make():
        return (torch.zeros(batch, 64),), torch.zeros(batch, dtype=torch.long)

    return Model("mlp", MLP, make, F.cross_entropy, adamw(optimizer), batch, dtype, {})


EXAMPLES = {
    "gpt2-small": lambda **kw: gpt2("small", **kw),
    "gpt2-medium": lambda **kw: gpt2("medium", **kw),
    "gpt2-xl": lambda **kw: gpt2("xl", **kw),
    "llama-7b": lambda **kw: llama("7b", **kw),
    "qwen2.5-1.5b": lambda **kw: qwen25("1.5b", **kw),
    "qwen2.5-3b": lambda **kw: qwen25("3b", **kw),
    "resnet50": resnet50,
    "mlp": mlp,
    "tiny-transformer": tiny_transformer,
    "convnet": convnet,
}

__all__ = [
    "EXAMPLES",
    "GPT2",
    "Llama",
    "ResNet",
    "ConvNet",
    "MLP",
    "Qwen2ForCausalLM",
    "gpt2",
    "llama",
    "qwen25",
    "resnet50",
    "mlp",
    "tiny_transformer",
    "convnet",
]
