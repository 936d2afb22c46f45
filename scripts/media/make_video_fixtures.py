#!/usr/bin/env python3
"""make_video_fixtures.py — small videos and reference results for clef's video processor
(tests/media/test_video.c).

Oracles, all from transformers and torchvision (pinned in scripts/requirements.txt):
  - frame sampling: Qwen3VLVideoProcessor.sample_frames with the video's metadata;
  - the video smart_resize of qwen3_vl's video processor;
  - timestamps: Qwen3VLProcessor._calculate_timestamps;
  - pixel rows: the real Qwen3VLVideoProcessor (the video processor Qwen3.5 releases name; it
    runs on transformers' torchvision backend) over the decoded frames and their metadata:
    sampling, torchvision's uint8 antialiased bicubic resize, the fused normalization and
    patchify, all the reference's own;
  - torchvision's resize alone (transforms.v2.functional.resize, BICUBIC, antialias=True, on
    uint8 tensors: what the processor does with frames) on a synthetic image the C test
    computes too, 60 size pairs.
The frames are handed to the processor as arrays (PyAV, transformers' video reader, is not
pinned): the test videos are lossless, so they are exactly the frames FFmpeg decodes.

Writes tests/media/fixtures/video/:
  raw_rgb.avi      12 frames 52x36 at 6 fps, uncompressed RGB (lossless: the decoded frames
                   are exactly the frames written here);
  mjpeg.avi        9 frames 40x30 at 3 fps, Motion-JPEG (lossy; sampling and grid only);
  torch_resize.txt src_w src_h dst_w dst_h sha256 of torchvision's resize of the synthetic
                   image (byte = (x*7 + y*13 + c*50 + (x*y) % 31) % 256);
  videos.txt       per video and settings: name file fps min_frames max_frames min_pixels
                   max_pixels total video_fps n idx... grid_t grid_h grid_w resized_h resized_w
                   pixels_sha256 (or -) n_timestamps ts...;
  sampling.txt     total video_fps fps min max -> indices, for 200 combinations;
  video_resize.txt n h w factor temporal min max -> h w (or "refused"), for 400 combinations.
Deterministic; run from the repository root: ${PYTHON:-python3} scripts/media/make_video_fixtures.py
"""
import hashlib
import io
import os
import struct
import types

import numpy as np
import torch
import torchvision.transforms.v2.functional as tvF
from PIL import Image
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import (Qwen3VLVideoProcessor,
                                                                    smart_resize)
from transformers.video_utils import VideoMetadata

OUT = os.path.join("tests", "media", "fixtures", "video")


def frames_for(n, w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    out = []
    for i in range(n):
        img = np.stack([(x * 5 + i * 20) % 256, (y * 7 + i * 11) % 256,
                        ((x + y) * 3 + i * 40) % 256], axis=-1).astype(np.int64)
        img += rng.integers(-10, 11, img.shape)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def chunk(fourcc, data):
    pad = b"\0" if len(data) % 2 else b""
    return fourcc + struct.pack("<I", len(data)) + data + pad


def lst(kind, payload):
    return chunk(b"LIST", kind + payload)


def avi(frames_bytes, w, h, fps, handler, compression, bitcount, ckid):
    n = len(frames_bytes)
    biggest = max(len(f) for f in frames_bytes)
    avih = struct.pack("<IIIIIIIIII16x", int(1e6 / fps), 0, 0, 0x10, n, 0, 1, biggest, w, h)
    strh = (b"vids" + handler + struct.pack("<IHHIIIIIIIIhhhh", 0, 0, 0, 0, 1, fps, 0, n, biggest,
                                             0xFFFFFFFF, 0, 0, 0, w, h))
    strf = struct.pack("<IiiHH4sIiiII", 40, w, h, 1, bitcount, compression, biggest, 0, 0, 0, 0)
    hdrl = lst(b"hdrl", chunk(b"avih", avih) + lst(b"strl", chunk(b"strh", strh) +
                                                   chunk(b"strf", strf)))
    movi_payload, index, offset = b"", b"", 4
    for f in frames_bytes:
        c = chunk(ckid, f)
        index += ckid + struct.pack("<III", 0x10, offset, len(f))
        movi_payload += c
        offset += len(c)
    body = b"AVI " + hdrl + lst(b"movi", movi_payload) + chunk(b"idx1", index)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def raw_frame(rgb):
    """BI_RGB 24-bit: BGR, rows bottom-up, padded to 4 bytes."""
    h, w, _ = rgb.shape
    stride = (w * 3 + 3) & ~3
    rows = [rgb[y, :, ::-1].tobytes().ljust(stride, b"\0") for y in range(h - 1, -1, -1)]
    return b"".join(rows)


def sample(total, video_fps, fps, min_frames, max_frames):
    fake = types.SimpleNamespace(fps=fps, min_frames=min_frames, max_frames=max_frames)
    meta = VideoMetadata(total_num_frames=total, fps=video_fps)
    return [int(i) for i in Qwen3VLVideoProcessor.sample_frames(fake, meta, fps=fps)]


def reference_pixels(frames, total, video_fps, s):
    """The real Qwen3-VL video processor on the whole video: (resized h, w, grid, sha256)."""
    vp = Qwen3VLVideoProcessor(
        patch_size=s["patch"], temporal_patch_size=s["temporal"], merge_size=s["merge"],
        size={"shortest_edge": s["min_pixels"], "longest_edge": s["max_pixels"]}, fps=s["fps"],
        min_frames=s["min_frames"], max_frames=s["max_frames"], image_mean=[0.5] * 3,
        image_std=[0.5] * 3)
    out = vp(videos=[np.stack(frames)], do_sample_frames=True, cap_pixels_per_frame=False,
             video_metadata=[VideoMetadata(total_num_frames=total, fps=video_fps)],
             return_tensors="pt")
    gt, gh, gw = (int(v) for v in out["video_grid_thw"][0])
    pv = out["pixel_values_videos"].numpy().astype("<f4")
    return gh * s["patch"], gw * s["patch"], (gt, gh, gw), hashlib.sha256(pv.tobytes()).hexdigest()


def synthetic(w, h):
    """The resize source test_video.c computes too."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256 for c in range(3)],
                    axis=-1).astype(np.uint8)


# (src_w, src_h, dst_w, dst_h): up, down, mixed, extreme, and video-like downscales.
TORCH_RESIZES = ([(w, h, dw, dh) for (w, h) in [(1, 1), (7, 3), (64, 48), (333, 97), (1000, 10)]
                  for (dw, dh) in [(1, 1), (2, 5), (32, 32), (64, 48), (65, 47), (129, 300),
                                   (480, 32), (1024, 96), (3, 900)]] +
                 [(1280, 720, 640, 352), (1920, 1080, 448, 256), (640, 480, 320, 224),
                  (52, 36, 224, 160), (36, 52, 32, 64), (720, 1280, 96, 160), (500, 4, 64, 32),
                  (3, 700, 32, 64), (97, 333, 333, 97), (256, 256, 256, 128), (256, 256, 128, 256),
                  (2000, 1500, 1000, 750), (4000, 30, 640, 32), (31, 31, 32, 32), (33, 33, 32, 32)])


def torch_resize_sha(w, h, dw, dh):
    img = torch.from_numpy(synthetic(w, h)).permute(2, 0, 1)[None]
    out = tvF.resize(img, [dh, dw], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
    return hashlib.sha256(out[0].permute(1, 2, 0).contiguous().numpy().tobytes()).hexdigest()


def main():
    os.makedirs(OUT, exist_ok=True)
    raw = frames_for(12, 52, 36, 1)
    with open(os.path.join(OUT, "raw_rgb.avi"), "wb") as f:
        f.write(avi([raw_frame(x) for x in raw], 52, 36, 6, b"DIB ", b"\0\0\0\0", 24, b"00db"))
    mj = frames_for(9, 40, 30, 2)
    jpegs = []
    for x in mj:
        buf = io.BytesIO()
        Image.fromarray(x).save(buf, "JPEG", quality=90)
        jpegs.append(buf.getvalue())
    with open(os.path.join(OUT, "mjpeg.avi"), "wb") as f:
        f.write(avi(jpegs, 40, 30, 3, b"MJPG", b"MJPG", 24, b"00dc"))

    base = dict(patch=16, temporal=2, merge=2, min_pixels=128 * 32 * 32,
                max_pixels=768 * 32 * 32, fps=2.0, min_frames=4, max_frames=768)
    cases = [
        ("raw_default", "raw_rgb.avi", raw, 12, 6.0, {}),
        ("raw_fps5_patch4", "raw_rgb.avi", raw, 12, 6.0,
         dict(patch=4, fps=5.0, min_pixels=1024, max_pixels=65536)),
        ("raw_odd_frames", "raw_rgb.avi", raw, 12, 6.0,
         dict(patch=8, fps=1.5, min_frames=3, min_pixels=2048, max_pixels=40000)),
        ("mjpeg_default", "mjpeg.avi", None, 9, 3.0, {}),
    ]
    lines = []
    for name, fname, frames, total, vfps, over in cases:
        s = dict(base, **over)
        idx = sample(total, vfps, s["fps"], s["min_frames"], s["max_frames"])
        ts = Qwen3VLProcessor._calculate_timestamps(None, list(idx), vfps, merge_size=s["temporal"])
        factor = s["patch"] * s["merge"]
        h, w = (36, 52) if fname == "raw_rgb.avi" else (30, 40)
        rh, rw = smart_resize(len(idx), h, w, temporal_factor=s["temporal"], factor=factor,
                              min_pixels=s["min_pixels"], max_pixels=s["max_pixels"])
        t = -(-len(idx) // s["temporal"])
        grid = (t, rh // s["patch"], rw // s["patch"])
        digest = "-"
        if frames is not None:
            rh2, rw2, grid2, digest = reference_pixels(frames, total, vfps, s)
            assert (rh2, rw2, tuple(grid2)) == (rh, rw, grid), name
        lines.append(" ".join(str(v) for v in [
            name, fname, repr(s["fps"]), s["min_frames"], s["max_frames"], s["min_pixels"],
            s["max_pixels"], s["patch"], s["temporal"], s["merge"], total, repr(vfps), len(idx),
            *idx, *grid, rh, rw, digest, len(ts), *[repr(float(v)) for v in ts]]))
    with open(os.path.join(OUT, "videos.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    rng = np.random.default_rng(7)
    lines = []
    for _ in range(200):
        total = int(rng.choice([1, 2, 3, 5, 9, 24, 100, 1001, 5000, 99999]))
        vfps = float(rng.choice([1.0, 7.5, 23.976023976023978, 24.0, 25.0, 29.97002997002997, 60.0]))
        fps = float(rng.choice([0.5, 1.0, 2.0, 3.0]))
        mn, mx = int(rng.choice([1, 2, 4])), int(rng.choice([4, 16, 64]))
        idx = sample(total, vfps, fps, mn, mx)
        lines.append("%d %r %r %d %d %d %s" % (total, vfps, fps, mn, mx, len(idx),
                                               " ".join(map(str, idx))))
    with open(os.path.join(OUT, "sampling.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = []
    for _ in range(400):
        n = int(rng.integers(1, 40))
        h, w = int(rng.integers(1, 3000)), int(rng.integers(1, 3000))
        if rng.random() < 0.1:
            h = max(1, w // int(rng.integers(150, 260)))
        factor = int(rng.choice([8, 28, 32]))
        temporal = int(rng.choice([1, 2, 3]))
        mn = int(rng.choice([1024, 4096, 131072]))
        mx = int(rng.choice([65536, 786432, 25165824]))
        try:
            rh, rw = smart_resize(n, h, w, temporal_factor=temporal, factor=factor, min_pixels=mn,
                                  max_pixels=mx)
            res = "%d %d" % (rh, rw)
        except ValueError:
            res = "refused"
        lines.append("%d %d %d %d %d %d %d %s" % (n, h, w, factor, temporal, mn, mx, res))
    with open(os.path.join(OUT, "video_resize.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "torch_resize.txt"), "w") as f:
        for w, h, dw, dh in TORCH_RESIZES:
            f.write("%d %d %d %d %s\n" % (w, h, dw, dh, torch_resize_sha(w, h, dw, dh)))
    print("wrote 2 videos, %d cases, 200 samplings, 400 smart_resizes, %d torchvision resizes "
          "to %s" % (len(cases), len(TORCH_RESIZES), OUT))


if __name__ == "__main__":
    main()
