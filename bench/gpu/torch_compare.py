#!/usr/bin/env python3
"""GPU codecs written in PyTorch ops, as GRACE writes them, timed like codec_gpu_bench.

GRACE (Xu et al., "GRACE: A Compressed Communication Framework for Distributed Machine
Learning", ICDCS 2021) implements its compressors as a few torch ops each. This script times
such implementations on the same inputs and sizes as bench/gpu/codec_gpu_bench.cc and prints
the same table columns, so the two tables can be read side by side:

  codec | n | payload bytes/value | encode ms | encode+EF ms | decode ms | memcpy ms |
  enc+dec GB/s | enc+dec / memcpy

- fp16:      x.half() / .float()
- signsgd:   GRACE SignSGDCompressor: x >= 0 as a bool tensor (1 byte per value, unpacked),
             decoded as sign * 2 - 1
- efsign:    GRACE EFSignSGDCompressor: the same plus the scale mean |x|
- qsgd:      GRACE QSGDCompressor, bucketed like Tamp's (norm per bucket of 512): level =
             floor(s |x| / norm) + Bernoulli, sign, int8 codes; decoded as norm / s * code
- topk:      GRACE TopKCompressor: torch.topk(|x|, k, sorted=False), gather the values;
             decoded by scatter into zeros
encode+EF is what error feedback costs written the GRACE way: c = g + r, encode(c),
r = c - decode(...) (so it includes a decode; Tamp's kernels fuse the residual update into
the encode instead).

Usage: python3 torch_compare.py [--sizes 24 26] [--iters 20] [--warmup 3] [--require-cuda]
Without a CUDA device it prints "no CUDA device: skipping" and exits 0, or with
--require-cuda (what run_on_device.sh passes on the device machine) exits 1.
"""

import argparse
import statistics
import sys

import torch


def median_ms(fn, warmup, iters):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + iters):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def payload_bytes(payload):
    return sum(t.numel() * t.element_size() for t in payload)


# Each codec: (label, encode(x) -> tuple of tensors, decode(payload, n) -> tensor).
def make_codecs(n):
    def fp16_enc(x):
        return (x.half(),)

    def fp16_dec(p, n):
        return p[0].float()

    def sign_enc(x):
        return (x >= 0,)

    def sign_dec(p, n):
        return p[0].to(torch.float32) * 2 - 1

    def efsign_enc(x):
        return (x >= 0, x.abs().mean().reshape(1))

    def efsign_dec(p, n):
        return (p[0].to(torch.float32) * 2 - 1) * p[1]

    def qsgd(levels, bucket):
        def enc(x):
            b = x.view(-1, bucket)
            norm = b.norm(dim=1, keepdim=True)
            level_float = levels / norm * b.abs()
            previous = level_float.floor()
            prob = torch.empty_like(b).uniform_()
            new_level = previous + (prob < (level_float - previous)).to(torch.float32)
            codes = (new_level * b.sign()).to(torch.int8)
            return (codes, norm)

        def dec(p, n):
            codes, norm = p
            return (norm / levels * codes.to(torch.float32)).view(-1)

        return enc, dec

    def topk(ratio):
        k = max(1, round(ratio * n))

        def enc(x):
            _, indices = torch.topk(x.abs(), k, sorted=False)
            return (x[indices], indices.to(torch.int32))

        def dec(p, n):
            values, indices = p
            out = torch.zeros(n, device=values.device, dtype=values.dtype)
            out.scatter_(0, indices.long(), values)
            return out

        return enc, dec

    q_enc, q_dec = qsgd(127, 512)
    t1_enc, t1_dec = topk(0.01)
    t01_enc, t01_dec = topk(0.001)
    return [
        ("fp16", fp16_enc, fp16_dec),
        ("signsgd", sign_enc, sign_dec),
        ("efsign", efsign_enc, efsign_dec),
        ("qsgd s=127 d=512", q_enc, q_dec),
        ("topk 1%", t1_enc, t1_dec),
        ("topk 0.1%", t01_enc, t01_dec),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[24, 26], help="log2 of n")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--require-cuda", action="store_true",
                        help="exit 1 instead of skipping when torch sees no CUDA device")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: skipping (torch.cuda.is_available() is False)")
        return 1 if args.require_cuda else 0
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name} ({props.multi_processor_count} SMs), torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}\n")
    print("| codec | n | payload bytes/value | encode ms | encode+EF ms | decode ms | memcpy ms | "
          "enc+dec GB/s | enc+dec / memcpy |")
    print("|---|---|---|---|---|---|---|---|---|")
    torch.manual_seed(0)
    for log_n in args.sizes:
        n = 1 << log_n
        scale = torch.pow(2.0, torch.randint(-12, 3, (n,), device="cuda").float())
        x = torch.randn(n, device="cuda") * scale
        out = torch.empty_like(x)
        memcpy_ms = median_ms(lambda: out.copy_(x), args.warmup, args.iters)
        for label, enc, dec in make_codecs(n):
            residual = torch.zeros_like(x)
            payload = enc(x)
            encode_ms = median_ms(lambda: enc(x), args.warmup, args.iters)
            decode_ms = median_ms(lambda: dec(payload, n), args.warmup, args.iters)

            def encode_ef():
                c = x + residual
                p = enc(c)
                residual.copy_(c - dec(p, n))

            encode_ef_ms = median_ms(encode_ef, args.warmup, args.iters)
            total_s = (encode_ms + decode_ms) / 1e3
            print(f"| {label} | 2^{log_n} | {payload_bytes(payload) / n:.3f} | {encode_ms:.3f} | "
                  f"{encode_ef_ms:.3f} | {decode_ms:.3f} | {memcpy_ms:.3f} | "
                  f"{4.0 * n / total_s / 1e9:.1f} | {memcpy_ms / (encode_ms + decode_ms):.3f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
