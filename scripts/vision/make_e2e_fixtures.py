#!/usr/bin/env python3
"""make_e2e_fixtures.py — end-to-end oracle fixtures for records with images (tests/vision/).

The reference path is the release's own joint_schema_model.py (loaded by scripts/clef_oracle.py):
encode_record(..., processor=...) + the transformers Qwen3.5 backbone WITH its vision tower +
JointSchemaHead, i.e. the reference ClefModel and systemone(), on the committed demo release
(demo/clef-demo: a vision tower of depth 2, hidden 32, patch 4). The processor is transformers'
Qwen3VLProcessor as AutoProcessor builds it for qwen3_5 with the pinned requirements (torchvision
installed): the torchvision image processor (Qwen2VLImageProcessor) and the Qwen3-VL video
processor, with the demo tower's patch/merge sizes and the bounds below (the demo ships no
preprocessor_config.json).

Records: the demo record and two smaller ones, each with 1, 2, 3 or 4 PNG images (seeded random
pixels, sizes from 8x8 to 70x45 so grids differ per image), images sent as data URLs or as
{content_type, base64}.

Written:
  tests/vision/fixtures/e2e_images.json
    {"release": "demo/clef-demo",
     "images": [{"key": <the request's image field, as sent>, "grid": [t, h, w],
                 "size": [width, height] (processed), "offset": k, "rows": n}],
     "records": [{"name", "request", "ids" (encode_record's input_ids),
                  "positions": [[T...], [H...], [W...]] (get_rope_index),
                  "logits": [[...] per question, presented order] (float64 oracle),
                  "answer": systemone()'s body (float32 oracle)}]}
  tests/vision/fixtures/e2e_pixels.bin
    the processor's pixel_values of every image, f32 little-endian, image i at float offset
    images[i].offset, rows x (3 * 2 * 4 * 4) floats: what the C test hands the tower in place
    of its own decoder (the image processor has its own parity tests under tests/media/).

  tests/vision/fixtures/e2e_videos.json
    {"release", "video_min_pixels", "video_max_pixels", "image_min_pixels", "image_max_pixels",
     "records": [{"name", "request" (videos: uncompressed-RGB AVIs as data URLs or
                  {content_type, base64}), "ids", "positions", "video_grids",
                  "video_pixels_sha256" (pixel_values_videos, f32 little-endian), "logits",
                  "answer"}]}
    the oracle is handed each AVI's frames with the container's frame count and rate (PyAV,
    transformers' own reader, is not pinned; the AVIs are lossless, so these are the frames
    FFmpeg decodes).

Logits come from the oracle in float64 (the same weights), the exact values to fp32 rounding;
the answer body from the float32 run (systemone() as published).

Usage: python3 scripts/vision/make_e2e_fixtures.py
Requirements: pip install -r scripts/requirements.txt (torch, torchvision, transformers, pillow,
safetensors).
"""
from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import clef_oracle  # noqa: E402

RELEASE = ROOT / "demo" / "clef-demo"
MIN_PIXELS, MAX_PIXELS = 8 * 8, 64 * 64
# video bounds (size.shortest_edge / longest_edge of the video processor: over all sampled frames)
VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS = 4 * 8 * 8, 4 * 32 * 32
# (width, height, frames, frames per second): sampled at 2 fps, 4 frames at least
VIDEOS = [(40, 24, 8, 4), (20, 36, 5, 1), (52, 36, 12, 6)]
OUT = ROOT / "tests" / "vision" / "fixtures"


def processor():
    """Qwen3VLProcessor as AutoProcessor builds it for qwen3_5 with the pinned requirements
    (torchvision installed): the torchvision image processor (Qwen2VLImageProcessor) and the
    real Qwen3VLVideoProcessor, with the demo tower's sizes and the fixture's bounds."""
    from transformers import PreTrainedTokenizerFast
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    cfg = json.loads((RELEASE / "config.json").read_text())["vision_config"]
    tok = PreTrainedTokenizerFast(tokenizer_file=str(RELEASE / "tokenizer.json"),
                                  eos_token="<|im_end|>", pad_token="<|endoftext|>")
    sizes = dict(patch_size=cfg["patch_size"], temporal_patch_size=cfg["temporal_patch_size"],
                 merge_size=cfg["spatial_merge_size"], image_mean=[0.5] * 3, image_std=[0.5] * 3)
    ip = Qwen2VLImageProcessor(size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
                               **sizes)
    vp = Qwen3VLVideoProcessor(size={"shortest_edge": VIDEO_MIN_PIXELS,
                                     "longest_edge": VIDEO_MAX_PIXELS},
                               cap_pixels_per_frame=False, **sizes)
    return Qwen3VLProcessor(image_processor=ip, tokenizer=tok, video_processor=vp)


def load_model(dtype):
    from safetensors.torch import load_file
    from transformers import Qwen3_5ForConditionalGeneration
    jsm = clef_oracle.load_reference()
    backbone = Qwen3_5ForConditionalGeneration.from_pretrained(
        str(RELEASE), dtype=dtype, attn_implementation="eager").eval()
    head_cfg = json.loads((RELEASE / "joint_head_config.json").read_text())
    head = jsm.JointSchemaHead(**head_cfg)
    head.load_state_dict({k: v.to(dtype) for k, v in load_file(str(RELEASE / "joint_head.safetensors")).items()},
                         strict=True)
    return jsm, jsm.ClefModel(backbone, head.to(dtype)).eval()


def png_image(rng, w, h):
    from PIL import Image
    img = Image.fromarray(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return img, buf.getvalue()


def avi_video(k, w, h, n, fps):
    """An uncompressed-RGB AVI (lossless: FFmpeg decodes exactly these frames) and its frames."""
    sys.path.insert(0, str(ROOT / "scripts" / "media"))
    import make_video_fixtures as mv
    frames = mv.frames_for(n, w, h, 100 + k)
    return frames, mv.avi([mv.raw_frame(x) for x in frames], w, h, fps, b"DIB ", b"\0\0\0\0", 24, b"00db")


def video_records(bases, model32, jsm32, jsm64, model64, rng):
    """Records with a short video, two videos, and images + a video (e2e_videos.json)."""
    from transformers.video_utils import VideoMetadata
    proc = processor()
    made = [avi_video(k, *v) for k, v in enumerate(VIDEOS)]
    cases = [("demo_1video", bases[0][1], [], [0]), ("small_2img_1video", bases[1][1], [(24, 16), (9, 30)], [1]),
             ("scored_2video", bases[2][1], [], [2, 0])]
    records = []
    for name, base, dims, vids in cases:
        request = copy.deepcopy(base)
        request["model"] = "clef-demo"
        pil_images, fields = [], []
        for k, (w, h) in enumerate(dims):
            img, png = png_image(rng, w, h)
            pil_images.append(img)
            fields.append("data:image/png;base64," + base64.b64encode(png).decode("ascii"))
        if fields:
            request["images"] = fields
        request["videos"] = []
        for j, v in enumerate(vids):
            b64 = base64.b64encode(made[v][1]).decode("ascii")
            request["videos"].append(f"data:video/x-msvideo;base64,{b64}" if j % 2 == 0
                                     else {"content_type": "video/x-msvideo", "base64": b64})
        # the oracle gets the decoded frames and the container's metadata (PyAV, transformers'
        # reader, is not pinned; the AVI is lossless, so these are the frames FFmpeg gives)
        meta = [VideoMetadata(total_num_frames=VIDEOS[v][2], fps=float(VIDEOS[v][3])) for v in vids]
        oracle_request = dict(request, videos=[np.stack(made[v][0]) for v in vids],
                              media_kwargs={"video_metadata": meta})
        if pil_images:
            oracle_request["images"] = pil_images
        enc = jsm32.encode_record(proc.tokenizer, oracle_request, processor=proc)
        media = enc.media
        ids = torch.tensor([enc.input_ids])
        mm = torch.zeros_like(ids)
        mm[0, media["token_offset"]:media["token_offset"] + len(media["mm_token_type_ids"])] = \
            torch.tensor(media["mm_token_type_ids"])
        pos, _ = model32.language_model.model.get_rope_index(
            ids, mm, image_grid_thw=media.get("image_grid_thw"), video_grid_thw=media["video_grid_thw"].clone())
        with torch.no_grad():
            oracle_request["media_kwargs"] = {"video_metadata": [VideoMetadata(total_num_frames=VIDEOS[v][2],
                                                                               fps=float(VIDEOS[v][3])) for v in vids]}
            batch64 = jsm64.collate_records([jsm64.encode_record(proc.tokenizer, oracle_request, processor=proc)],
                                            proc.tokenizer.pad_token_id, torch.device("cpu"))
            for key in ("pixel_values", "pixel_values_videos"):
                if key in batch64["media"]:
                    batch64["media"][key] = batch64["media"][key].double()
            logits = model64(batch64)[0]
        oracle_request["media_kwargs"] = {"video_metadata": [VideoMetadata(total_num_frames=VIDEOS[v][2],
                                                                           fps=float(VIDEOS[v][3])) for v in vids]}
        answer = jsm32.systemone(model32, proc, oracle_request)
        answer["model"] = request["model"]
        grids = media["video_grid_thw"].tolist()
        pv = media["pixel_values_videos"].float().numpy().astype("<f4")
        records.append({"name": name, "request": request, "ids": list(enc.input_ids),
                        "positions": pos[:, 0, :].tolist(), "video_grids": grids,
                        "video_pixels_sha256": hashlib.sha256(pv.tobytes()).hexdigest(),
                        "logits": [[float(x) for x in q.tolist()] for q in logits],
                        "answer": answer})
        print(f"{name}: {len(enc.input_ids)} tokens, video grids {grids}")
    return {"release": "demo/clef-demo", "video_min_pixels": VIDEO_MIN_PIXELS,
            "video_max_pixels": VIDEO_MAX_PIXELS, "image_min_pixels": MIN_PIXELS,
            "image_max_pixels": MAX_PIXELS, "records": records}


def main() -> int:
    rng = np.random.default_rng(20261130)
    proc = processor()
    demo = json.loads((ROOT / "demo" / "record.json").read_text())
    small = {"id": "small", "state": {"note": "photo of the parcel at the door"},
             "questions": {"damaged": {"type": "noul", "instructions": "Is the parcel damaged?"}}}
    scored = {"id": "scored", "state": {"caption": "kitchen, two shelves", "items": 3},
              "questions": {"tidy": {"type": "score", "instructions": "How tidy is the room?",
                                     "criteria": ["messy", "ok", "tidy"]},
                            "room": {"type": "choice", "criteria": {"kitchen": "a kitchen", "bath": "a bathroom"}}}}
    sizes = [[(8, 8)], [(40, 24), (17, 33)], [(70, 45), (24, 24), (9, 60)],
             [(16, 16), (33, 20), (48, 48), (12, 30)]]
    bases = [("demo", demo), ("small", small), ("scored", scored)]
    cases = []
    for i, (name, base) in enumerate(bases):
        for n_img in (1, 2, 3, 4):
            if (name == "small" and n_img not in (1, 4)) or (name == "scored" and n_img not in (2, 3)):
                continue
            cases.append((f"{name}_{n_img}img", base, sizes[n_img - 1]))

    patch = json.loads((RELEASE / "config.json").read_text())["vision_config"]["patch_size"]
    jsm32, model32 = load_model(torch.float32)
    jsm64, model64 = load_model(torch.float64)
    images, records, pixel_blobs, offset = [], [], [], 0
    for name, base, dims in cases:
        request = copy.deepcopy(base)
        request["model"] = "clef-demo"
        pil_images, fields = [], []
        for k, (w, h) in enumerate(dims):
            img, png = png_image(rng, w, h)
            pil_images.append(img)
            b64 = base64.b64encode(png).decode("ascii")
            fields.append(f"data:image/png;base64,{b64}" if k % 2 == 0
                          else {"content_type": "image/png", "base64": b64})
        request["images"] = fields
        oracle_request = dict(request, images=pil_images)
        enc = jsm32.encode_record(proc.tokenizer, oracle_request, processor=proc)
        media = enc.media
        grids = media["image_grid_thw"].tolist()
        pv = media["pixel_values"].float().numpy()
        row0 = 0
        for k, g in enumerate(grids):
            rows = int(np.prod(g))
            blob = pv[row0:row0 + rows]
            row0 += rows
            images.append({"key": fields[k], "grid": g, "size": [g[2] * patch, g[1] * patch],
                           "offset": offset, "rows": rows})
            pixel_blobs.append(blob.astype("<f4").tobytes())
            offset += blob.size
        # positions: the backbone's get_rope_index on this record alone
        ids = torch.tensor([enc.input_ids])
        mm = torch.zeros_like(ids)
        mm[0, media["token_offset"]:media["token_offset"] + len(media["mm_token_type_ids"])] = \
            torch.tensor(media["mm_token_type_ids"])
        pos, _ = model32.language_model.model.get_rope_index(ids, mm, image_grid_thw=media["image_grid_thw"])
        with torch.no_grad():
            batch64 = jsm64.collate_records([jsm64.encode_record(proc.tokenizer, oracle_request, processor=proc)],
                                            proc.tokenizer.pad_token_id, torch.device("cpu"))
            batch64["media"]["pixel_values"] = batch64["media"]["pixel_values"].double()
            logits = model64(batch64)[0]
        answer = jsm32.systemone(model32, proc, oracle_request)
        answer["model"] = request["model"]
        records.append({"name": name, "request": request, "ids": list(enc.input_ids),
                        "positions": pos[:, 0, :].tolist(),
                        "logits": [[float(x) for x in q.tolist()] for q in logits],
                        "answer": answer})
        print(f"{name}: {len(enc.input_ids)} tokens, grids {grids}")
    (OUT / "e2e_pixels.bin").write_bytes(b"".join(pixel_blobs))
    doc = {"release": "demo/clef-demo", "images": images, "records": records}
    (OUT / "e2e_images.json").write_text(json.dumps(doc, ensure_ascii=False) + "\n")
    doc = video_records(bases, model32, jsm32, jsm64, model64, np.random.default_rng(20261201))
    (OUT / "e2e_videos.json").write_text(json.dumps(doc, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
