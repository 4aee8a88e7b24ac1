#!/usr/bin/env python3
"""Generate the TVM model corpus: `kernels/tvm/` (small shapes, with reference outputs) and
`kernels/tvm/paper/` (the shapes the SIRIUS paper evaluates; no parameter values).

    python scripts/gen_models.py small            # every model, small shapes (+ .npz)
    python scripts/gen_models.py paper bert_layer # one model, paper shapes
    python scripts/gen_models.py small bert_qkv_fp16   # a float16 model (small shapes only)
    python scripts/gen_models.py list

Needs apache-tvm 0.27 (`pip install -e .[tvm]`). Every model is a `tvm.relax.frontend.nn`
module; dense layers keep their weight as (in, out) (`Dense`), the layout a deployed model has
after TVM's weight transforms, so that no per-run weight transpose appears (the single-operator
`dense` keeps TOPI's (out, in) weight and its transpose). Small shapes keep each model to about
10^7 GPU-thread instructions so that the CPU executor runs it in seconds. docs/tvm-import.md
describes the corpus.

The `*_fp16` models (in `kernels/tvm/fp16/`) are the same modules built in float16 (every
parameter, input and layer), small shapes only, with TVM's llvm (CPU) build in float16 as the
reference.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tvm import relax  # noqa: E402
from tvm.relax.frontend import nn  # noqa: E402
from tvm.relax.frontend.nn import op  # noqa: E402

from sirius.frontend.tvm import (  # noqa: E402
    TvmModel,
    from_nn,
    import_model,
    reference_outputs,
    write_npz,
)

F32 = "float32"
DTYPE = F32  # the element type modules are built in (float16 inside `precision`)


@contextlib.contextmanager
def precision(dtype: str) -> Iterator[None]:
    """Build modules (parameters, layers, inputs) in `dtype` inside the block."""
    global DTYPE
    old, DTYPE = DTYPE, dtype
    try:
        yield
    finally:
        DTYPE = old


# building blocks ---------------------------------------------------------------------------
class Dense(nn.Module):
    """y = x @ w + b with w of shape (in, out)."""

    def __init__(self, n_in: int, n_out: int, bias: bool = True):
        self.w = nn.Parameter((n_in, n_out), DTYPE)
        self.b = nn.Parameter((n_out,), DTYPE) if bias else None

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = op.matmul(x, self.w)
        return y + self.b if self.b is not None else y


class Affine(nn.Module):
    """Inference batch norm folded into a per-channel scale and shift (NCHW)."""

    def __init__(self, channels: int):
        self.scale = nn.Parameter((channels, 1, 1), DTYPE)
        self.shift = nn.Parameter((channels, 1, 1), DTYPE)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return x * self.scale + self.shift


class ConvBN(nn.Module):
    def __init__(self, c_in: int, c_out: int, k: int, stride: int = 1, groups: int = 1,
                 relu: bool = True):
        self.conv = nn.Conv2D(c_in, c_out, k, stride=stride, padding=k // 2, groups=groups,
                              bias=False, dtype=DTYPE)
        self.bn = Affine(c_out)
        self.relu = relu

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = self.bn(self.conv(x))
        return op.relu(y) if self.relu else y


class Conv(nn.Module):
    """A bias-free 2-D convolution with a rectangular kernel and "same"-style padding."""

    def __init__(self, c_in: int, c_out: int, k: tuple[int, int], stride: tuple[int, int]):
        self.weight = nn.Parameter((c_out, c_in, k[0], k[1]), DTYPE)
        self.stride, self.padding = stride, (k[0] // 2, k[1] // 2)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return op.conv2d(x, self.weight, stride=self.stride, padding=self.padding)


def clip(x: nn.Tensor, lo: float, hi: float) -> nn.Tensor:
    return op.wrap_nested(relax.op.clip(x._expr, lo, hi), name="clip")


def avg_pool(x: nn.Tensor, k: int, stride: int, pad: int) -> nn.Tensor:
    return op.wrap_nested(relax.op.nn.avg_pool2d(x._expr, (k, k), (stride, stride),
                                                 (pad, pad), count_include_pad=False),
                          name="avg_pool")


def max_pool(x: nn.Tensor, k: int, stride: int, pad: int) -> nn.Tensor:
    return op.wrap_nested(relax.op.nn.max_pool2d(x._expr, (k, k), (stride, stride),
                                                 (pad, pad)), name="max_pool")


# models ----------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, sizes: list[int]):
        pairs = zip(sizes[:-1], sizes[1:], strict=True)
        self.layers = nn.ModuleList([Dense(a, b) for a, b in pairs])

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = op.relu(x)
        return x


class BertLayer(nn.Module):
    """One BERT encoder layer (post-norm): self-attention, add & norm, FFN (GELU), add & norm."""

    def __init__(self, seq: int, hidden: int, heads: int, ffn: int):
        self.seq, self.hidden, self.heads = seq, hidden, heads
        self.query, self.key, self.value = (Dense(hidden, hidden) for _ in range(3))
        self.attn_out = Dense(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, dtype=DTYPE)
        self.ffn_in = Dense(hidden, ffn)
        self.ffn_out = Dense(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, dtype=DTYPE)

    def heads_first(self, t: nn.Tensor) -> nn.Tensor:
        d = self.hidden // self.heads
        return op.permute_dims(op.reshape(t, (self.seq, self.heads, d)), (1, 0, 2))

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        d = self.hidden // self.heads
        q, k, v = (self.heads_first(f(x)) for f in (self.query, self.key, self.value))
        scores = op.matmul(q, op.permute_dims(k, (0, 2, 1))) * (1.0 / d ** 0.5)
        ctx = op.matmul(op.softmax(scores, axis=-1), v)
        ctx = op.reshape(op.permute_dims(ctx, (1, 0, 2)), (self.seq, self.hidden))
        y = self.ln1(self.attn_out(ctx) + x)
        return self.ln2(self.ffn_out(op.gelu(self.ffn_in(y))) + y)


class Bert(nn.Module):
    def __init__(self, layers: int, seq: int, hidden: int, heads: int, ffn: int):
        self.layers = nn.ModuleList([BertLayer(seq, hidden, heads, ffn) for _ in range(layers)])

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class BertQKV(nn.Module):
    """The BERT QKV subgraph: three parallel dense + bias + reshape (to heads) branches."""

    def __init__(self, seq: int, hidden: int, heads: int):
        self.seq, self.hidden, self.heads = seq, hidden, heads
        self.query, self.key, self.value = (Dense(hidden, hidden) for _ in range(3))

    def forward(self, x: nn.Tensor):
        return tuple(BertLayer.heads_first(self, f(x)) for f in (self.query, self.key,
                                                                  self.value))


def columns(x: nn.Tensor, n: int) -> list[nn.Tensor]:
    """`n` equal column blocks of a matrix, as strided slices (which TVM fuses into their
    elementwise consumers, where `split` would copy each block in a kernel of its own)."""
    width = int(x.shape[1]) // n
    return [op.wrap_nested(relax.op.strided_slice(x._expr, axes=[1], begin=[k * width],
                                                  end=[(k + 1) * width]), name="cols")
            for k in range(n)]


def rows(x: nn.Tensor) -> list[nn.Tensor]:
    """The rows of a matrix (time steps), each a (1, n) strided slice."""
    return [op.wrap_nested(relax.op.strided_slice(x._expr, axes=[0], begin=[t], end=[t + 1]),
                           name="row")
            for t in range(int(x.shape[0]))]


class LSTMCell(nn.Module):
    def __init__(self, n_in: int, hidden: int):
        self.x2g = Dense(n_in, 4 * hidden)
        self.h2g = Dense(hidden, 4 * hidden, bias=False)

    def forward(self, x: nn.Tensor, h: nn.Tensor, c: nn.Tensor):
        i, f, g, o = columns(self.x2g(x) + self.h2g(h), 4)
        c = op.sigmoid(f) * c + op.sigmoid(i) * op.tanh(g)
        return op.sigmoid(o) * op.tanh(c), c


class LSTM(nn.Module):
    """A stacked LSTM over `steps` time steps (batch 1); returns the last layer's outputs."""

    def __init__(self, layers: int, steps: int, n_in: int, hidden: int):
        self.steps, self.hidden = steps, hidden
        self.cells = nn.ModuleList([LSTMCell(n_in if i == 0 else hidden, hidden)
                                    for i in range(layers)])

    def run(self, xs: list[nn.Tensor], h0: nn.Tensor, c0: nn.Tensor) -> list[nn.Tensor]:
        for cell in self.cells:
            h, c = h0, c0
            out = []
            for x in xs:
                h, c = cell(x, h, c)
                out.append(h)
            xs = out
        return xs

    def forward(self, x: nn.Tensor, h0: nn.Tensor, c0: nn.Tensor) -> nn.Tensor:
        xs = rows(x)
        return op.concat(self.run(xs, h0, c0), dim=0)


class Seq2Seq(nn.Module):
    """LSTM encoder, LSTM decoder with dot-product attention over the encoder outputs
    (teacher forcing: the decoder inputs are given)."""

    def __init__(self, src: int, tgt: int, n_in: int, hidden: int):
        self.src, self.tgt = src, tgt
        self.encoder = LSTMCell(n_in, hidden)
        self.decoder = LSTMCell(n_in, hidden)
        self.combine = Dense(2 * hidden, hidden)

    def forward(self, x: nn.Tensor, y: nn.Tensor, h0: nn.Tensor, c0: nn.Tensor) -> nn.Tensor:
        h, c = h0, c0
        enc = []
        for xt in rows(x):
            h, c = self.encoder(xt, h, c)
            enc.append(h)
        memory = op.concat(enc, dim=0)                    # (src, hidden)
        memory_t = op.permute_dims(memory, (1, 0))        # (hidden, src)
        outs = []
        for yt in rows(y):
            h, c = self.decoder(yt, h, c)
            attn = op.softmax(op.matmul(h, memory_t), axis=-1)  # (1, src)
            ctx = op.matmul(attn, memory)                        # (1, hidden)
            outs.append(op.tanh(self.combine(op.concat([ctx, h], dim=1))))
        return op.concat(outs, dim=0)


class ResNeXtBlock(nn.Module):
    """Bottleneck with grouped 3x3 convolution (cardinality `groups`), BN folded, residual."""

    def __init__(self, c_in: int, mid: int, c_out: int, groups: int, stride: int = 1):
        self.reduce = ConvBN(c_in, mid, 1)
        self.grouped = ConvBN(mid, mid, 3, stride=stride, groups=groups)
        self.expand = ConvBN(mid, c_out, 1, relu=False)
        self.shortcut = ConvBN(c_in, c_out, 1, stride=stride, relu=False) \
            if stride != 1 or c_in != c_out else None

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = self.expand(self.grouped(self.reduce(x)))
        s = self.shortcut(x) if self.shortcut is not None else x
        return op.relu(y + s)


class ResNeXt(nn.Module):
    """ResNeXt: stem, stages of bottleneck blocks, global average pool, classifier."""

    def __init__(self, c_in: int, stem: int, stages: list[tuple[int, int, int, int]],
                 groups: int, classes: int, stem_kernel: int, stem_pool: bool):
        self.stem = ConvBN(c_in, stem, stem_kernel, stride=2 if stem_pool else 1)
        self.stem_pool = stem_pool
        blocks = []
        c = stem
        for n_blocks, mid, c_out, stride in stages:
            for b in range(n_blocks):
                blocks.append(ResNeXtBlock(c, mid, c_out, groups, stride if b == 0 else 1))
                c = c_out
        self.blocks = nn.ModuleList(blocks)
        self.fc = Dense(c, classes)
        self.channels = c

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.stem(x)
        if self.stem_pool:
            x = max_pool(x, 3, 2, 1)
        for block in self.blocks:
            x = block(x)
        x = op.reshape(op.wrap_nested(relax.op.mean(x._expr, axis=[2, 3]), name="gap"),
                       (1, self.channels))
        return self.fc(x)


class SepConv(nn.Module):
    """NASNet separable convolution: relu, depthwise kxk, pointwise 1x1, BN (folded)."""

    def __init__(self, c: int, k: int):
        self.depthwise = nn.Conv2D(c, c, k, padding=k // 2, groups=c, bias=False, dtype=DTYPE)
        self.pointwise = nn.Conv2D(c, c, 1, bias=False, dtype=DTYPE)
        self.bn = Affine(c)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.bn(self.pointwise(self.depthwise(op.relu(x))))


class NASNetNormalCell(nn.Module):
    """NASNet-A normal cell: five pairwise-combined branches of the two previous states,
    concatenated (5C channels)."""

    def __init__(self, c_prev_prev: int, c_prev: int, c: int):
        self.adjust_pp = ConvBN(c_prev_prev, c, 1)
        self.adjust_p = ConvBN(c_prev, c, 1)
        self.sep3_h, self.sep5_h = SepConv(c, 3), SepConv(c, 5)
        self.sep3_p, self.sep5_p, self.sep3_p2 = SepConv(c, 3), SepConv(c, 5), SepConv(c, 3)
        self.sep3_h2 = SepConv(c, 3)

    def forward(self, hp: nn.Tensor, h: nn.Tensor) -> nn.Tensor:
        hp, h = self.adjust_pp(hp), self.adjust_p(h)
        b0 = self.sep3_h(h) + h
        b1 = self.sep3_p(hp) + self.sep5_h(h)
        b2 = avg_pool(h, 3, 1, 1) + hp
        b3 = avg_pool(hp, 3, 1, 1) + avg_pool(hp, 3, 1, 1)
        b4 = self.sep5_p(hp) + self.sep3_p2(hp)
        return op.concat([b0, b1, b2, b3, b4], dim=1)


class NASNet(nn.Module):
    def __init__(self, cells: int, c_in: int, c: int):
        self.stem = ConvBN(c_in, c, 3)
        self.cells = nn.ModuleList([NASNetNormalCell(c if i < 2 else 5 * c,
                                                     c if i == 0 else 5 * c, c)
                                    for i in range(cells)])

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        hp = h = self.stem(x)
        for cell in self.cells:
            hp, h = h, cell(hp, h)
        return h


class GRUCell(nn.Module):
    def __init__(self, n_in: int, hidden: int):
        self.x2g = Dense(n_in, 3 * hidden)
        self.h2g = Dense(hidden, 3 * hidden)

    def forward(self, x: nn.Tensor, h: nn.Tensor) -> nn.Tensor:
        xr, xz, xn = columns(self.x2g(x), 3)
        hr, hz, hn = columns(self.h2g(h), 3)
        r, z = op.sigmoid(xr + hr), op.sigmoid(xz + hz)
        n = op.tanh(xn + r * hn)
        return n + z * (h - n)


class DeepSpeech2(nn.Module):
    """Two 2-D convolutions over (frequency, time) with clipped ReLU, bidirectional GRU layers
    (directions summed), a classifier per time step."""

    def __init__(self, freq: int, channels: int, k1: tuple[int, int], k2: tuple[int, int],
                 rnn_layers: int, hidden: int, classes: int, steps: int):
        self.conv1 = Conv(1, channels, k1, (2, 2))
        self.bn1 = Affine(channels)
        self.conv2 = Conv(channels, channels, k2, (2, 1))
        self.bn2 = Affine(channels)
        self.freq2 = ((freq + 1) // 2 + 1) // 2
        self.steps2 = (steps + 1) // 2
        self.channels = channels
        feat = channels * self.freq2
        self.fwd = nn.ModuleList([GRUCell(feat if i == 0 else hidden, hidden)
                                  for i in range(rnn_layers)])
        self.bwd = nn.ModuleList([GRUCell(feat if i == 0 else hidden, hidden)
                                  for i in range(rnn_layers)])
        self.fc = Dense(hidden, classes)

    def forward(self, spec: nn.Tensor, h0: nn.Tensor) -> nn.Tensor:
        x = clip(self.bn1(self.conv1(spec)), 0.0, 20.0)
        x = clip(self.bn2(self.conv2(x)), 0.0, 20.0)
        # (1, C, F, T) -> (T, C*F)
        x = op.reshape(op.permute_dims(x, (3, 0, 1, 2)), (self.steps2, self.channels * self.freq2))
        xs = rows(x)
        for fwd, bwd in zip(self.fwd, self.bwd, strict=True):
            hf, hb = h0, h0
            outf, outb = [], []
            for t in range(self.steps2):
                hf = fwd(xs[t], hf)
                outf.append(hf)
                hb = bwd(xs[self.steps2 - 1 - t], hb)
                outb.append(hb)
            xs = [a + b for a, b in zip(outf, reversed(outb), strict=True)]
        return self.fc(op.concat(xs, dim=0))


class SingleOp(nn.Module):
    def __init__(self, fn: Callable, params: dict[str, tuple[int, ...]]):
        self.fn = fn
        for name, shape in params.items():
            setattr(self, name, nn.Parameter(shape, DTYPE))

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fn(self, x)


# the corpus ------------------------------------------------------------------------------------
def _dense_amplitudes(model: TvmModel) -> TvmModel:
    """Dense weights are (in, out): their fan-in is the first dimension."""
    rfunc = model.module[model.function]
    amps = dict(model.amplitudes)
    for p in rfunc.params:
        if p.name.endswith(".w"):
            amps.setdefault(p.name, 1.0 / float(np.sqrt(int(p.ty.shape.values[0]))))
        elif p.name.endswith(".scale"):
            amps.setdefault(p.name, 1.0)
    return TvmModel(model.name, model.module, model.function, model.params, amps,
                    model.output_names)


def _model(name: str, module: nn.Module, inputs: dict, outputs: tuple[str, ...] | None = None):
    return _dense_amplitudes(from_nn(name, module, {k: (v, DTYPE) for k, v in inputs.items()},
                                     output_names=outputs))


def mlp(shape: str = "small") -> TvmModel:
    sizes, batch = ([64, 128, 64, 16], 8) if shape == "small" else ([1024, 4096, 4096, 1024], 64)
    return _model("mlp", MLP(sizes), {"x": (batch, sizes[0])})


def bert_layer(shape: str = "small") -> TvmModel:
    s, h, n, f = (16, 64, 4, 256) if shape == "small" else (128, 768, 12, 3072)
    return _model("bert_layer", BertLayer(s, h, n, f), {"x": (s, h)})


def bert_base(shape: str = "small") -> TvmModel:
    s, h, n, f = (8, 32, 2, 64) if shape == "small" else (128, 768, 12, 3072)
    return _model("bert_base", Bert(12, s, h, n, f), {"x": (s, h)})


def bert_qkv(shape: str = "small") -> TvmModel:
    s, h, n = (32, 64, 4) if shape == "small" else (128, 768, 12)
    return _model("bert_qkv", BertQKV(s, h, n), {"x": (s, h)}, ("q", "k", "v"))


def _lstm(name: str, layers: int, steps: int, n_in: int, hidden: int) -> TvmModel:
    return _model(name, LSTM(layers, steps, n_in, hidden),
                  {"x": (steps, n_in), "h0": (1, hidden), "c0": (1, hidden)})


def lstm(shape: str = "small") -> TvmModel:
    return _lstm("lstm", 2, 4, *((32, 32) if shape == "small" else (256, 256)))


def lstm_large(shape: str = "small") -> TvmModel:
    return _lstm("lstm_large", *((4, 8, 32, 32) if shape == "small" else (10, 100, 256, 256)))


def seq2seq(shape: str = "small") -> TvmModel:
    src, tgt, n_in, hid = (4, 3, 32, 32) if shape == "small" else (32, 16, 256, 256)
    return _model("seq2seq", Seq2Seq(src, tgt, n_in, hid),
                  {"x": (src, n_in), "y": (tgt, n_in), "h0": (1, hid), "c0": (1, hid)})


def resnext_block(shape: str = "small") -> TvmModel:
    c, mid, hw, g = (16, 16, 8, 4) if shape == "small" else (256, 128, 56, 32)
    return _model("resnext_block", ResNeXtBlock(c, mid, c, g), {"x": (1, c, hw, hw)})


def resnext50(shape: str = "small") -> TvmModel:
    if shape == "small":
        net = ResNeXt(3, 8, [(1, 8, 16, 1), (1, 16, 32, 2), (1, 32, 64, 2), (1, 64, 128, 2)],
                      groups=4, classes=10, stem_kernel=3, stem_pool=False)
        return _model("resnext50", net, {"x": (1, 3, 8, 8)})
    net = ResNeXt(3, 64, [(3, 128, 256, 1), (4, 256, 512, 2), (6, 512, 1024, 2),
                          (3, 1024, 2048, 2)], groups=32, classes=1000, stem_kernel=7,
                  stem_pool=True)
    return _model("resnext50", net, {"x": (1, 3, 224, 224)})


def nasnet(shape: str = "small") -> TvmModel:
    cells, c, hw = (2, 4, 8) if shape == "small" else (6, 32, 32)
    return _model("nasnet", NASNet(cells, 3, c), {"x": (1, 3, hw, hw)})


def deepspeech2(shape: str = "small") -> TvmModel:
    if shape == "small":
        freq, steps, ch, k1, k2, layers, hid, classes = 16, 8, 4, (5, 3), (3, 3), 2, 16, 8
    else:
        freq, steps, ch, k1, k2, layers, hid, classes = 161, 50, 32, (41, 11), (21, 11), 5, \
            800, 29
    net = DeepSpeech2(freq, ch, k1, k2, layers, hid, classes, steps)
    return _model("deepspeech2", net, {"spec": (1, 1, freq, steps), "h0": (1, hid)})


# single operators (TOPI-style) ---------------------------------------------------------------
def _single(name: str, fn: Callable, x: tuple[int, ...], params: dict | None = None):
    return _model(name, SingleOp(fn, params or {}), {"x": x})


def op_softmax(shape: str = "small") -> TvmModel:
    return _single("op_softmax", lambda m, x: op.softmax(x, axis=-1),
                   (4, 16, 32) if shape == "small" else (12, 128, 128))


def op_layer_norm(shape: str = "small") -> TvmModel:
    h = 64 if shape == "small" else 768
    return _single("op_layer_norm",
                   lambda m, x: op.layer_norm(x, [h], m.gamma, m.beta),
                   (16, h) if shape == "small" else (128, h), {"gamma": (h,), "beta": (h,)})


def op_reduce(shape: str = "small") -> TvmModel:
    return _single("op_reduce", lambda m, x: op.sum(x, axis=[1]),
                   (32, 128) if shape == "small" else (1024, 4096))


def op_conv2d(shape: str = "small") -> TvmModel:
    ci, co, hw = (8, 16, 8) if shape == "small" else (64, 64, 56)
    return _single("op_conv2d", lambda m, x: op.conv2d(x, m.weight, padding=1),
                   (1, ci, hw, hw), {"weight": (co, ci, 3, 3)})


def op_dense(shape: str = "small") -> TvmModel:
    n, k, o = (8, 64, 32) if shape == "small" else (128, 768, 3072)
    return _single("op_dense", lambda m, x: op.matmul(x, op.permute_dims(m.weight, (1, 0))),
                   (n, k), {"weight": (o, k)})


def op_batch_matmul(shape: str = "small") -> TvmModel:
    b, n, k, m_ = (4, 16, 16, 16) if shape == "small" else (12, 128, 64, 128)
    return _single("op_batch_matmul", lambda m, x: op.matmul(x, m.other), (b, n, k),
                   {"other": (b, k, m_)})


def op_depthwise_conv(shape: str = "small") -> TvmModel:
    c, hw = (16, 8) if shape == "small" else (128, 56)
    return _single("op_depthwise_conv",
                   lambda m, x: op.conv2d(x, m.weight, padding=1, groups=c),
                   (1, c, hw, hw), {"weight": (c, 1, 3, 3)})


def op_pool(shape: str = "small") -> TvmModel:
    c, hw = (8, 16) if shape == "small" else (64, 112)
    return _single("op_pool", lambda m, x: max_pool(x, 3, 2, 1), (1, c, hw, hw))


MODELS: dict[str, Callable[[str], TvmModel]] = {f.__name__: f for f in (
    mlp, bert_layer, bert_base, bert_qkv, lstm, lstm_large, seq2seq, resnext_block, resnext50,
    nasnet, deepspeech2, op_softmax, op_layer_norm, op_reduce, op_conv2d, op_dense,
    op_batch_matmul, op_depthwise_conv, op_pool)}


def _fp16(build: Callable[[str], TvmModel]) -> Callable[[str], TvmModel]:
    """`build` in float16, named NAME_fp16; small shapes only."""
    def model(shape: str = "small") -> TvmModel:
        if shape != "small":
            raise SystemExit(f"{build.__name__}_fp16: small shapes only")
        with precision("float16"):
            m = build(shape)
        return dataclasses.replace(m, name=f"{m.name}_fp16")
    model.__name__ = f"{build.__name__}_fp16"
    return model


FP16_MODELS = {f"{b.__name__}_fp16": _fp16(b) for b in (bert_layer, bert_qkv, lstm,
                                                          resnext_block)}
MODELS.update(FP16_MODELS)


# writing -----------------------------------------------------------------------------------------
def command_for(shape: str, name: str) -> str:
    return f"python scripts/gen_models.py {shape} {name}"


def generate(name: str, shape: str, out: Path, reference: bool) -> dict:
    model = MODELS[name](shape)
    result = import_model(model, out, command_for(shape, name))
    row = {"name": name, "shape": shape, "kernels": result.kernels,
           "launches": result.launches, "buffers": result.buffers,
           "seconds": round(result.seconds, 2), "cu_bytes": result.cu_path.stat().st_size}
    if reference:
        start = time.perf_counter()
        write_npz(out / f"{name}.npz", reference_outputs(model, result.plan))
        row["reference_seconds"] = round(time.perf_counter() - start, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=["small", "paper", "all", "list"])
    ap.add_argument("names", nargs="*", help="models (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "kernels" / "tvm",
                    help="corpus directory (paper shapes go to OUT/paper)")
    ap.add_argument("--no-reference", action="store_true", help="skip the .npz references")
    args = ap.parse_args(argv)
    if args.shape == "list":
        print("\n".join(MODELS))
        return 0
    names = args.names or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}; see `list`")
    shapes = ["small", "paper"] if args.shape == "all" else [args.shape]
    for shape in shapes:
        out = args.out if shape == "small" else args.out / "paper"
        for name in names:
            if shape != "small" and name in FP16_MODELS:
                if args.names:
                    ap.error(f"{name}: small shapes only")
                continue
            where = out / "fp16" if name in FP16_MODELS else out
            row = generate(name, shape, where, shape == "small" and not args.no_reference)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
