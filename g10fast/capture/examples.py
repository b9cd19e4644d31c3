"""Bundled capture examples in plain torch (no weights, no downloads, no torchvision):
`gpt2-small`, `gpt2-xl`, `llama-7b`, `resnet50`, and the small `mlp`, `tiny-transformer`,
`convnet` of the tests. Each factory returns a `g10fast.capture.Model`."""

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
        return F.linear(self.ln_f(x), self.wte.weight)      # tied head


def lm_loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten())


def _lm_inputs(batch, seq, vocab):
    def make():
        x = torch.zeros(batch, seq, dtype=torch.long)
        return (x,), torch.zeros(batch, seq, dtype=torch.long)
    return make


def gpt2(size="small", batch=8, seq_len=1024, dtype="bfloat16", optimizer="adamw"):
    d, heads, layers = {"small": (768, 12, 12), "medium": (1024, 16, 24),
                        "large": (1280, 20, 36), "xl": (1600, 25, 48)}[size]
    return Model(f"gpt2-{size}", lambda: GPT2(50257, max(1024, seq_len), d, heads, layers),
                 _lm_inputs(batch, seq_len, 50257), lm_loss, adamw(optimizer), batch, dtype,
                 {"seq_len": seq_len, "family": "gpt2"})


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
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d, bias=False)
                                                              for _ in range(4))

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.h, D // self.h).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
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
    vocab, d, heads, f, layers = {"7b": (32000, 4096, 32, 11008, 32),
                                  "13b": (32000, 5120, 40, 13824, 40)}[size]
    return Model(f"llama-{size}", lambda: Llama(vocab, d, heads, f, layers, seq_len),
                 _lm_inputs(batch, seq_len, vocab), lm_loss, adamw(optimizer), batch, dtype,
                 {"seq_len": seq_len, "family": "llama"})


def tiny_transformer(batch=2, seq_len=16, dtype="float32", optimizer="adamw"):
    """A 2-layer Llama-style LM (vocab 1000, d 64, 4 heads, ffn 172): the tests' transformer."""
    return Model("tiny-transformer", lambda: Llama(1000, 64, 4, 172, 2, seq_len),
                 _lm_inputs(batch, seq_len, 1000), lm_loss, adamw(optimizer), batch, dtype,
                 {"seq_len": seq_len, "family": "llama"})


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
            self.downsample = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False),
                                            nn.BatchNorm2d(out))

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
    return Model("resnet50", lambda: ResNet((3, 4, 6, 3)), _image_inputs(batch, image_size, 1000),
                 F.cross_entropy, adamw(opt), batch, dtype, {"image_size": image_size})


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
    return Model("convnet", ConvNet, _image_inputs(batch, image_size, 10), F.cross_entropy,
                 adamw(opt), batch, dtype, {"image_size": image_size})


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
    "resnet50": resnet50,
    "mlp": mlp,
    "tiny-transformer": tiny_transformer,
    "convnet": convnet,
}

__all__ = ["EXAMPLES", "GPT2", "Llama", "ResNet", "ConvNet", "MLP", "gpt2", "llama", "resnet50",
           "mlp", "tiny_transformer", "convnet"]
