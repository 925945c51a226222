#!/usr/bin/env python3
"""Writes the layout and compute-profile files of models/ (model.kind LAYOUT).

The layouts are derived here from the published architectures (shapes as the reference
implementations name their parameters; no code or weights are taken from them):
  resnet50     He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, Table 1
               (50-layer, bottleneck blocks [3, 4, 6, 3]); torchvision's parameter names.
               161 tensors, 25,557,032 parameters (BatchNorm running statistics are buffers,
               not parameters, so they are not synchronised).
  bert_base    Devlin et al., "BERT", NAACL 2019: L=12, H=768, A=12, feed-forward 3072, WordPiece
               vocabulary 30522, 512 positions, 2 segment types, with the pooler; Hugging Face's
               parameter names. 199 tensors, 109,482,240 parameters.
  gpt2_small   Radford et al., "Language Models are Unsupervised Multitask Learners", 2019, the
               117M/124M model: 12 layers, d_model 768, feed-forward 3072, vocabulary 50257,
               1024 positions, output head tied to the token embedding; Hugging Face's names and
               shapes (its Conv1D weights are [in, out]). 148 tensors, 124,439,808 parameters.

The profiles are ESTIMATES, NOT MEASUREMENTS: each layer's forward time is its forward FLOPs
(multiply-adds count 2) at the batch below divided by an assumed sustained rate of
RATE_TFLOPS, and backward is twice forward (the usual estimate: gradients of the inputs and
of the weights). Elementwise layers (BatchNorm, LayerNorm) count ELEMENTWISE_FLOPS per
activation element. Scale them with the profile's `scale` line, or replace them with figures
measured on a GPU.

Usage: models/make_layouts.py          # writes models/*.layout, models/*.profile
       models/make_layouts.py --check  # exit 1 if a file differs from what it would write
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RATE_TFLOPS = 10.0          # Assumed sustained rate (roughly an fp32 V100); an assumption.
ELEMENTWISE_FLOPS = 8       # Per activation element of a normalisation layer.


class Model:
    def __init__(self, name, source, batch_note):
        self.name = name
        self.source = source
        self.batch_note = batch_note
        self.tensors = []   # (name, shape)
        self.layers = []    # (forward_flops, [tensor names])

    def tensor(self, name, *shape):
        self.tensors.append((name, shape))
        return name

    def layer(self, flops, *names):
        self.layers.append((flops, list(names)))

    def params(self):
        total = 0
        for _, shape in self.tensors:
            n = 1
            for d in shape:
                n *= d
            total += n
        return total


def resnet50(batch=32, side=224):
    m = Model("resnet50", "He et al. 2016 (CVPR), Table 1, 50-layer; torchvision names",
              f"batch {batch} images of {side}x{side}")

    def conv_bn(prefix, bn, cin, cout, k, out_side):
        w = m.tensor(f"{prefix}.weight", cout, cin, k, k)
        g = m.tensor(f"{bn}.weight", cout)
        b = m.tensor(f"{bn}.bias", cout)
        elements = batch * cout * out_side * out_side
        m.layer(2 * cin * cout * k * k * elements // cout + ELEMENTWISE_FLOPS * elements, w, g, b)

    s = side // 2
    conv_bn("conv1", "bn1", 3, 64, 7, s)
    s //= 2  # max-pool
    cin = 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512]), 1):
        for block in range(blocks):
            p = f"layer{stage}.{block}"
            stride = 2 if block == 0 and stage > 1 else 1
            conv_bn(f"{p}.conv1", f"{p}.bn1", cin, width, 1, s)
            s //= stride
            conv_bn(f"{p}.conv2", f"{p}.bn2", width, width, 3, s)
            conv_bn(f"{p}.conv3", f"{p}.bn3", width, 4 * width, 1, s)
            if block == 0:
                conv_bn(f"{p}.downsample.0", f"{p}.downsample.1", cin, 4 * width, 1, s)
            cin = 4 * width
    w = m.tensor("fc.weight", 1000, 2048)
    b = m.tensor("fc.bias", 1000)
    m.layer(2 * batch * 2048 * 1000, w, b)
    return m


def transformer_block_flops(tokens, seq, d, ff):
    """Forward FLOPs of one block's parts: (qkv + attention core, out proj, ffn in, ffn out)."""
    return (2 * tokens * d * 3 * d + 2 * 2 * tokens * seq * d,
            2 * tokens * d * d, 2 * tokens * d * ff, 2 * tokens * ff * d)


def bert_base(batch=32, seq=128):
    m = Model("bert_base", "Devlin et al. 2019 (NAACL), BERT-base; Hugging Face names",
              f"batch {batch} sequences of {seq} tokens")
    d, ff, tokens = 768, 3072, batch * seq
    ln = ELEMENTWISE_FLOPS * tokens * d
    e = "embeddings"
    m.layer(ln, m.tensor(f"{e}.word_embeddings.weight", 30522, d),
            m.tensor(f"{e}.position_embeddings.weight", 512, d),
            m.tensor(f"{e}.token_type_embeddings.weight", 2, d),
            m.tensor(f"{e}.LayerNorm.weight", d), m.tensor(f"{e}.LayerNorm.bias", d))
    qkv, proj, ffn_in, ffn_out = transformer_block_flops(tokens, seq, d, ff)
    for i in range(12):
        p = f"encoder.layer.{i}"
        names = []
        for part in ("query", "key", "value"):
            names += [m.tensor(f"{p}.attention.self.{part}.weight", d, d),
                      m.tensor(f"{p}.attention.self.{part}.bias", d)]
        m.layer(qkv, *names)
        m.layer(proj + ln, m.tensor(f"{p}.attention.output.dense.weight", d, d),
                m.tensor(f"{p}.attention.output.dense.bias", d),
                m.tensor(f"{p}.attention.output.LayerNorm.weight", d),
                m.tensor(f"{p}.attention.output.LayerNorm.bias", d))
        m.layer(ffn_in, m.tensor(f"{p}.intermediate.dense.weight", ff, d),
                m.tensor(f"{p}.intermediate.dense.bias", ff))
        m.layer(ffn_out + ln, m.tensor(f"{p}.output.dense.weight", d, ff),
                m.tensor(f"{p}.output.dense.bias", d),
                m.tensor(f"{p}.output.LayerNorm.weight", d),
                m.tensor(f"{p}.output.LayerNorm.bias", d))
    m.layer(2 * batch * d * d, m.tensor("pooler.dense.weight", d, d),
            m.tensor("pooler.dense.bias", d))
    return m


def gpt2_small(batch=8, seq=1024):
    m = Model("gpt2_small", "Radford et al. 2019, GPT-2 117M/124M; Hugging Face names",
              f"batch {batch} sequences of {seq} tokens")
    d, ff, vocab, tokens = 768, 3072, 50257, batch * seq
    ln = ELEMENTWISE_FLOPS * tokens * d
    # The head is tied to wte: wte's gradient is final once the first layer's backward is.
    m.layer(0, m.tensor("wte.weight", vocab, d), m.tensor("wpe.weight", 1024, d))
    qkv, proj, ffn_in, ffn_out = transformer_block_flops(tokens, seq, d, ff)
    for i in range(12):
        p = f"h.{i}"
        m.layer(ln, m.tensor(f"{p}.ln_1.weight", d), m.tensor(f"{p}.ln_1.bias", d))
        m.layer(qkv, m.tensor(f"{p}.attn.c_attn.weight", d, 3 * d),
                m.tensor(f"{p}.attn.c_attn.bias", 3 * d))
        m.layer(proj, m.tensor(f"{p}.attn.c_proj.weight", d, d),
                m.tensor(f"{p}.attn.c_proj.bias", d))
        m.layer(ln, m.tensor(f"{p}.ln_2.weight", d), m.tensor(f"{p}.ln_2.bias", d))
        m.layer(ffn_in, m.tensor(f"{p}.mlp.c_fc.weight", d, ff), m.tensor(f"{p}.mlp.c_fc.bias", ff))
        m.layer(ffn_out, m.tensor(f"{p}.mlp.c_proj.weight", ff, d),
                m.tensor(f"{p}.mlp.c_proj.bias", d))
    # ln_f's layer also carries the tied output head's matmul (it has no tensor of its own).
    m.layer(ln + 2 * tokens * d * vocab, m.tensor("ln_f.weight", d), m.tensor("ln_f.bias", d))
    return m


def header(m, kind):
    return [f"# {m.name} {kind}, written by models/make_layouts.py (do not edit; rerun it).",
            f"# Source: {m.source}.",
            f"# {len(m.tensors)} tensors, {m.params():,} parameters."]


def layout_text(m):
    lines = ["tamp-layout 1"] + header(m, "layout") + ["# name dimensions..."]
    lines += [f"{name} {' '.join(str(d) for d in shape)}" for name, shape in m.tensors]
    return "\n".join(lines) + "\n"


def ms(flops):
    return f"{flops / (RATE_TFLOPS * 1e12) * 1e3:.4f}"


def profile_text(m):
    total = sum(f for f, _ in m.layers)
    lines = ["tamp-profile 1"] + header(m, "compute profile") + [
        "# ESTIMATE, NOT A MEASUREMENT: forward ms = the layer's forward FLOPs at "
        f"{m.batch_note}",
        f"# / an assumed sustained {RATE_TFLOPS:g} TFLOP/s; backward = 2 x forward. One step: "
        f"{3 * total / (RATE_TFLOPS * 1e12) * 1e3:.1f} ms.",
        "# Change `scale` to rescale every time (e.g. 0.5 for a GPU twice that rate).",
        "scale 1",
        "# layer FORWARD_MS BACKWARD_MS TENSORS..."]
    lines += [f"layer {ms(f)} {ms(2 * f)} {' '.join(names)}" for f, names in m.layers]
    return "\n".join(lines) + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    stale = []
    for m in (resnet50(), bert_base(), gpt2_small()):
        for suffix, text in (("layout", layout_text(m)), ("profile", profile_text(m))):
            path = os.path.join(HERE, f"{m.name}.{suffix}")
            if check:
                current = open(path).read() if os.path.exists(path) else None
                if current != text:
                    stale.append(path)
            else:
                with open(path, "w") as f:
                    f.write(text)
    if stale:
        sys.exit("stale (rerun models/make_layouts.py): " + ", ".join(stale))


if __name__ == "__main__":
    main()
