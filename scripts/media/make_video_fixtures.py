#!/usr/bin/env python3
"""make_video_fixtures.py — small videos and reference results for clef's video processor
(tests/media/test_video.c).

Oracles, all from transformers (pinned in scripts/requirements.txt):
  - frame sampling: Qwen3VLVideoProcessor.sample_frames with the video's metadata;
  - the video smart_resize of qwen3_vl's video processor;
  - timestamps: Qwen3VLProcessor._calculate_timestamps;
  - pixel rows: Qwen3VLVideoProcessor.patchify (torch) over frames normalized in torch's fused
    order ((x - 127.5) / 127.5, as the torchvision backend's rescale_and_normalize does).
The one step that is NOT the reference's: the resize. The reference video processor resizes
with torchvision, which is not in the pinned requirements (installing it would switch
transformers' image processor to its torchvision backend, see docs/media.md); frames here are
resized with Pillow's BICUBIC, as clef does. So the pixel check shows decoding, sampling,
normalization and layout exactly, not torchvision's resize.

Writes tests/media/fixtures/video/:
  raw_rgb.avi      12 frames 52x36 at 6 fps, uncompressed RGB (lossless: the decoded frames
                   are exactly the frames written here);
  mjpeg.avi        9 frames 40x30 at 3 fps, Motion-JPEG (lossy; sampling and grid only);
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


def reference_pixels(frames, idx, s):
    factor = s["patch"] * s["merge"]
    h, w = frames[0].shape[:2]
    rh, rw = smart_resize(len(idx), h, w, temporal_factor=s["temporal"], factor=factor,
                          min_pixels=s["min_pixels"], max_pixels=s["max_pixels"])
    resized = [np.asarray(Image.fromarray(frames[i]).resize((rw, rh), Image.BICUBIC)) for i in idx]
    video = torch.from_numpy(np.stack(resized)).permute(0, 3, 1, 2)[None]  # B T C H W uint8
    mean = torch.tensor([0.5] * 3) * (1.0 / (1 / 255))
    std = torch.tensor([0.5] * 3) * (1.0 / (1 / 255))
    video = (video.float() - mean[None, None, :, None, None]) / std[None, None, :, None, None]
    patches, gt, gh, gw = Qwen3VLVideoProcessor.patchify(None, video, s["patch"], s["merge"],
                                                          s["temporal"])
    pv = patches[0].numpy().astype("<f4")
    return rh, rw, (gt, gh, gw), hashlib.sha256(pv.tobytes()).hexdigest()


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
            rh2, rw2, grid2, digest = reference_pixels(frames, idx, s)
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
    print("wrote 2 videos, %d cases, 200 samplings, 400 resizes to %s" % (len(cases), OUT))


if __name__ == "__main__":
    main()
