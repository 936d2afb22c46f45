#!/usr/bin/env python3
"""peer_torch_quant.py — the PyTorch peer of `bench_gpu_quant gemm`: the same linear shapes
and row counts through torch's own GPU GEMMs on the same GPU, in the same call.

  python3 peer_torch_quant.py 9b|27b [reps]

Columns (CUDA events, median of reps after 3 warm-ups):
  bf16      x_bf16 @ W_bf16.T, bf16 out (what a transformers bf16 linear runs)
  fp8       torch._scaled_mm(e4m3 x, e4m3 W.T, per-token x per-channel fp32 scales, bf16 out):
            torch's row-wise FP8 GEMM (the one vLLM/SGLang-style W8A8 uses), GEMM only
  fp8+q     the same with the dynamic per-token quantization of x done in torch ops first
            (amax, divide, clamp, cast), as compressed-tensors does
  int8      torch._int_mm(int8 x, int8 W.T) -> int32 (cuBLAS int8), GEMM only
Random data, never zeros. Prints markdown rows matching bench_gpu_quant's table.
"""
import sys

import torch
from peer_timing import cuda_median_ms

SHAPES = {
    "27b": [("in_proj_qkv", 10240, 5120), ("in_proj_z", 6144, 5120), ("out_proj, o_proj", 5120, 6144),
            ("q_proj", 12288, 5120), ("k_proj, v_proj", 1024, 5120), ("gate, up", 17408, 5120),
            ("down", 5120, 17408)],
    "9b": [("in_proj_qkv, q_proj", 8192, 4096), ("in_z, out_proj, o_proj", 4096, 4096),
           ("k_proj, v_proj", 1024, 4096), ("gate, up", 12288, 4096), ("down", 4096, 12288)],
}
ROWS = [298, 1502, 2270, 8192, 8 * 1502]


def quantize_fp8(x):
    amax = x.abs().amax(dim=1, keepdim=True).float()
    s = (amax / 448.0).clamp(min=torch.finfo(torch.float32).eps)
    return (x / s).clamp(-448, 448).to(torch.float8_e4m3fn), s


def main():
    shape = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    dev = "cuda"
    print("# torch %s, %s" % (torch.__version__, torch.cuda.get_device_name()))
    print("\n| model | linear | N x K | T | torch bf16 ms | TFLOP/s | torch fp8 ms | TFLOP/s | torch fp8+q ms "
          "| torch int8 ms | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n, k in SHAPES[shape]:
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
        wq, sw = quantize_fp8(w)
        sw = sw.view(1, n)
        wt = wq.t()  # column-major view, as _scaled_mm wants its second operand
        w8 = torch.randint(-127, 128, (n, k), device=dev, dtype=torch.int8)
        for t in ROWS:
            x = torch.randn(t, k, device=dev, dtype=torch.bfloat16)
            xq, sx = quantize_fp8(x)
            x8 = torch.randint(-127, 128, (t, k), device=dev, dtype=torch.int8)
            fl = 2.0 * n * k * t / 1e9
            ms_bf16 = cuda_median_ms(lambda: x @ w.t(), reps)
            try:
                ms_fp8 = cuda_median_ms(lambda: torch._scaled_mm(xq, wt, scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16), reps)

                def fp8_with_quant():
                    q, s = quantize_fp8(x)
                    return torch._scaled_mm(q, wt, scale_a=s, scale_b=sw, out_dtype=torch.bfloat16)

                ms_fp8q = cuda_median_ms(fp8_with_quant, reps)
            except Exception as e:  # a torch without row-wise fp8 on this GPU: say so, go on
                print("fp8 failed: %s" % e, file=sys.stderr)
                ms_fp8 = ms_fp8q = float("nan")
            try:
                ms_i8 = cuda_median_ms(lambda: torch._int_mm(x8, w8.t()), reps)
            except Exception as e:
                print("int8 failed: %s" % e, file=sys.stderr)
                ms_i8 = float("nan")
            print("| %s | %s | %d x %d | %d | %.3f | %.0f | %.3f | %.0f | %.3f | %.3f | %.0f |" % (
                shape.upper(), name, n, k, t, ms_bf16, fl / ms_bf16, ms_fp8, fl / ms_fp8, ms_fp8q, ms_i8,
                fl / ms_i8), flush=True)
            del x, xq, sx, x8
        del w, wq, sw, wt, w8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
