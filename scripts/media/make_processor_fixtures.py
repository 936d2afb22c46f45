#!/usr/bin/env python3
"""make_processor_fixtures.py — images and reference results for clef's pixel decoders and
image processor (tests/media/test_processor.c).

Oracle: transformers' Qwen2-VL image processor with the PIL backend
(Qwen2VLImageProcessorPil, transformers pinned in scripts/requirements.txt), fed what
transformers' own load_image returns (Pillow: ImageOps.exif_transpose(Image.open(f))
.convert("RGB")); and the torchvision backend (Qwen2VLImageProcessor, torchvision pinned):
the processor AutoProcessor gives the release's joint_schema_model.py whenever torchvision is
installed, as with the pinned requirements — clef's default (media/image_processor.h).

Writes tests/media/fixtures/processor/:
  *.png / *.jpg / *.webp   images Pillow wrote (or, for variants Pillow cannot write —
                           16-bit RGB, short palettes, interlaced, eXIf — PNGs assembled here
                           chunk by chunk), deterministic, kept small;
  cases.txt                one line per (image, processor settings):
      name file patch temporal merge min_pixels max_pixels
      src_w src_h decoded_sha256 resized_w resized_h resized_sha256
      grid_t grid_h grid_w pixels_sha256 n_samples (index value)*n_samples
    decoded = the RGB uint8 image (HWC) after EXIF orientation; resized = Pillow's BICUBIC
    resize of it to the processor's smart_resize size (HWC uint8); pixels = the processor's
    pixel_values as little-endian float32, row-major [n_rows, row_len]; samples are values of
    pixel_values at fixed positions, printed with repr (shown by the test on a mismatch);
  cases_torchvision.txt    per case of cases.txt, the torchvision processor's result:
      name file patch temporal merge min_pixels max_pixels grid_t grid_h grid_w pixels_sha256
  refusals.txt             "<file> <status> <pillow>" for damaged files clef must refuse:
                           lying headers, truncation, bad CRC, missing PLTE, 0 height,
                           1x100000, bombs, one pixel over the cap, animated WebP; <pillow>
                           records whether Pillow decodes it anyway (it pads a JPEG whose data
                           ends early with gray, accepts a PNG without IEND, shows a palette
                           PNG without PLTE as black) — clef refuses those rather than invent
                           pixels;
  *.json, configs.txt      processor config files (flat, legacy min/max_pixels keys, nested
                           processor_config.json) and what Qwen2VLImageProcessorPil reads from
                           them: name patch temporal merge min_pixels max_pixels mean std
                           rescale_factor;
  video_configs.txt        the same for video processor configs (Qwen3VLVideoProcessor), with
                           fps min_frames max_frames after rescale_factor;
  resize.txt               Pillow BICUBIC resizes of a synthetic RGB image that the test makes
                           itself (pixel formula below), no file needed:
      src_w src_h dst_w dst_h sha256
Deterministic; run from the repository root:
  ${PYTHON:-python3} scripts/media/make_processor_fixtures.py
"""
import hashlib
import io
import json
import os
import struct
import zlib

import numpy as np
from PIL import Image, PngImagePlugin
from transformers.image_utils import load_image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    Qwen2VLImageProcessorPil, smart_resize)

OUT = os.path.join("tests", "media", "fixtures", "processor")
QWEN35 = dict(patch=16, temporal=2, merge=2, min_pixels=65536, max_pixels=16777216)


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def pattern(w, h, seed, noise=12.0):
    """A smooth RGB picture with some texture and sharp edges (so resize rounding matters)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / max(w, 1) * 6.28 * 1.5 + seed)
    g = 255.0 * y / max(h - 1, 1)
    b = ((x // 7 + y // 5) % 2) * 200.0 + 20.0
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, noise, (h, w, 3))
    return Image.fromarray(np.clip(np.rint(img), 0, 255).astype(np.uint8))


def synthetic(w, h):
    """The resize source the C test computes too: byte = (x*7 + y*13 + c*50 + (x*y) % 31) % 256."""
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256 for c in range(3)]
    return Image.fromarray(np.stack(planes, axis=-1).astype(np.uint8))


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_raw(w, h, bit_depth, color_type, rows, extra_before=(), plte=None, trns=None,
            interlace=0, extra_after=()):
    """A PNG assembled by hand; `rows` are the filtered-type-0 scanlines' bytes (for Adam7
    interlace, the concatenated pass scanlines)."""
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, interlace))
    for kind, data in extra_before:
        out += png_chunk(kind, data)
    if plte is not None:
        out += png_chunk(b"PLTE", plte)
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    out += png_chunk(b"IDAT", zlib.compress(b"".join(b"\x00" + r for r in rows), 9))
    for kind, data in extra_after:
        out += png_chunk(kind, data)
    return out + png_chunk(b"IEND", b"")


def adam7_rows(arr, bytes_per_px):
    """Scanlines of the 7 Adam7 passes of an HxWxC uint8 (or big-endian packed) array."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]
    rows = []
    for x0, y0, dx, dy in passes:
        sub = arr[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        rows += [sub[i].tobytes() for i in range(sub.shape[0])]
    return rows


def exif_orientation(value):
    exif = Image.Exif()
    exif[0x0112] = value
    return exif.tobytes()


def make_images():
    """name -> file bytes."""
    files = {}

    def save(name, img, fmt, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        files[name] = buf.getvalue()

    base = pattern(61, 43, 1)
    # PNG in every mode Pillow writes
    save("rgb.png", base, "PNG")
    rgba = base.copy()
    rgba.putalpha(Image.fromarray(np.tile(np.arange(61, dtype=np.uint8) * 4, (43, 1))))
    save("rgba.png", rgba, "PNG")
    save("gray.png", base.convert("L"), "PNG")
    save("gray_alpha.png", rgba.convert("LA"), "PNG")
    save("palette.png", base.convert("P", palette=Image.Palette.ADAPTIVE, colors=37), "PNG")
    pal_t = base.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    save("palette_trns.png", pal_t, "PNG", transparency=bytes(range(0, 256, 16)))
    save("bilevel.png", base.convert("1"), "PNG")
    g16 = (np.asarray(base.convert("L"), dtype=np.uint16) * 3)  # 0..765: clamps above 255
    save("gray16.png", Image.fromarray(g16), "PNG")
    # PNG variants assembled by hand
    arr = np.asarray(base)
    rgb16 = (arr.astype(np.uint16) * 257 + np.arange(61, dtype=np.uint16)[None, :, None])
    files["rgb16.png"] = png_raw(61, 43, 16, 2, [r.astype(">u2").tobytes() for r in rgb16])
    idx = (np.arange(23 * 17).reshape(17, 23) % 9).astype(np.uint8)  # indices 0..8
    files["palette_short.png"] = png_raw(23, 17, 8, 3, [r.tobytes() for r in idx],
                                         plte=bytes([200, 10, 10, 10, 200, 10, 10, 10, 200]))
    idx4 = (np.arange(20 * 9).reshape(9, 20) % 16).astype(np.uint8)
    packed = [bytes((r[i] << 4) | r[i + 1] for i in range(0, 20, 2)) for r in idx4]
    files["palette_4bit.png"] = png_raw(20, 9, 4, 3, packed,
                                        plte=bytes(range(0, 48)), trns=bytes([0, 128, 255]))
    g2 = (np.arange(16 * 6).reshape(6, 16) % 4).astype(np.uint8)
    files["gray_2bit.png"] = png_raw(16, 6, 2, 0, [bytes((r[i] << 6) | (r[i + 1] << 4) |
                                                         (r[i + 2] << 2) | r[i + 3]
                                                         for i in range(0, 16, 4)) for r in g2])
    files["interlaced.png"] = png_raw(61, 43, 8, 2, adam7_rows(arr, 3), interlace=1)
    la16 = np.stack([arr[..., 0].astype(np.uint16) * 257 + 3, arr[..., 1].astype(np.uint16) * 200],
                    axis=-1)
    files["gray_alpha16.png"] = png_raw(61, 43, 16, 4, [r.astype(">u2").tobytes() for r in la16])
    rgba16 = np.concatenate([arr.astype(np.uint16) * 257, np.full((43, 61, 1), 999, np.uint16)], -1)
    files["rgba16.png"] = png_raw(61, 43, 16, 6, [r.astype(">u2").tobytes() for r in rgba16])
    files["exif6.png"] = png_raw(61, 43, 8, 2, [r.tobytes() for r in arr],
                                 extra_before=[(b"eXIf", exif_orientation(6)[6:])])
    files["exif8_after.png"] = png_raw(61, 43, 8, 2, [r.tobytes() for r in arr],
                                       extra_after=[(b"eXIf", exif_orientation(8)[6:])])
    # JPEG: subsamplings, gray, CMYK (Pillow writes Adobe inverted CMYK), progressive, EXIF
    save("rgb420.jpg", base, "JPEG", quality=85)
    save("rgb444.jpg", base, "JPEG", quality=92, subsampling=0)
    save("rgb422.jpg", base, "JPEG", quality=75, subsampling=1)
    save("gray.jpg", base.convert("L"), "JPEG", quality=80)
    save("cmyk.jpg", base.convert("CMYK"), "JPEG", quality=90)
    save("progressive.jpg", base, "JPEG", quality=80, progressive=True)
    for o in range(1, 9):
        save("exif%d.jpg" % o, pattern(29, 18, o), "JPEG", quality=90, exif=exif_orientation(o))
    # XMP orientation (Pillow's fallback when EXIF has no Orientation tag)
    def xmp(v, form):
        inner = ('tiff:Orientation="%d"' % v) if form == "attr" else (
            "<tiff:Orientation>%d</tiff:Orientation>" % v)
        return ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/'
                '02/22-rdf-syntax-ns#"><rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/"'
                ' %s/></rdf:RDF></x:xmpmeta>' % inner if form == "attr" else
                '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description>%s</rdf:Description>'
                '</x:xmpmeta>' % inner).encode()
    save("xmp6.jpg", pattern(29, 18, 21), "JPEG", quality=90, xmp=xmp(6, "attr"))
    save("exif1_xmp6.jpg", pattern(29, 18, 22), "JPEG", quality=90, exif=exif_orientation(1),
         xmp=xmp(6, "attr"))
    save("xmp5.webp", pattern(24, 40, 23), "WEBP", lossless=True, xmp=xmp(5, "elem"))
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", xmp(8, "attr").decode())
    save("xmp8_itxt.png", pattern(23, 31, 24), "PNG", pnginfo=info)
    info = PngImagePlugin.PngInfo()
    info.add_text("XML:com.adobe.xmp", xmp(3, "elem").decode())
    save("xmp3_text.png", pattern(23, 31, 25), "PNG", pnginfo=info)
    # WebP
    save("lossy.webp", base, "WEBP", quality=80)
    save("lossless.webp", base, "WEBP", lossless=True)
    save("alpha_lossy.webp", rgba, "WEBP", quality=80)
    save("alpha_lossless.webp", rgba, "WEBP", lossless=True, exact=True)
    save("exif6.webp", pattern(24, 40, 9), "WEBP", quality=85, exif=exif_orientation(6))
    # sizes and aspect ratios
    save("tiny_1x1.png", pattern(1, 1, 3), "PNG")
    save("tiny_3x2.jpg", pattern(3, 2, 4), "JPEG", quality=95)
    save("wide_200x1.png", pattern(200, 1, 5), "PNG")
    save("tall_1x200.png", pattern(1, 200, 6), "PNG")
    save("tall_3x577.webp", pattern(3, 577, 7), "WEBP", lossless=True)
    save("odd_333x97.jpg", pattern(333, 97, 8), "JPEG", quality=70)
    # exactly the 16,000,000-pixel cap; bilevel with a few shapes keeps the file small
    y, x = np.mgrid[0:4000, 0:4000]
    shapes = ((x - 1800) ** 2 + (y - 2100) ** 2 < 700 ** 2) ^ ((x // 250 + y // 400) % 2 == 0)
    save("huge_4000x4000.png", Image.fromarray(shapes), "PNG")
    y, x = np.mgrid[0:1000, 0:1500].astype(np.float64)
    smooth = np.stack([127 + 120 * np.sin(x / 240.0), 255 * y / 999.0,
                       127 + 120 * np.cos(np.hypot(x - 700, y - 400) / 90.0)], axis=-1)
    save("big_1500x1000.jpg", Image.fromarray(np.rint(smooth).astype(np.uint8)), "JPEG",
         quality=50)
    return files


def make_refusals(files):
    """name -> (file bytes, status clef must give: invalid = 422, too_long = 413)."""
    bad = {}
    jpg = files["rgb420.jpg"]
    sof = jpg.index(b"\xff\xc0")
    # the frame header claims 2000x1500 (within the caps) but the data is of a 61x43 image
    bad["sof_lies.jpg"] = (jpg[:sof + 5] + struct.pack(">HH", 1500, 2000) + jpg[sof + 9:],
                           "invalid")
    bad["no_eoi.jpg"] = (jpg[:-2], "invalid")
    bad["half.jpg"] = (jpg[:len(jpg) // 2], "invalid")
    png = files["rgb.png"]
    bad["ihdr_lies.png"] = (png_raw(3000, 2000, 8, 2, [b"\x00" * 9] * 4), "invalid")
    idat = png.index(b"IDAT")
    crc_broken = bytearray(png)
    crc_broken[idat + 10] ^= 0xFF  # inside IDAT's data: the chunk CRC no longer matches
    bad["idat_crc.png"] = (bytes(crc_broken), "invalid")
    bad["no_iend.png"] = (png[:-12], "invalid")
    bad["palette_no_plte.png"] = (png_raw(4, 4, 8, 3, [b"\x00" * 4] * 4), "invalid")
    webp = files["lossy.webp"]
    bad["half.webp"] = (webp[:len(webp) // 2], "invalid")
    frames = [pattern(16, 16, i) for i in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], duration=100,
                   lossless=True)
    bad["animated.webp"] = (buf.getvalue(), "invalid")
    bad["zero_height.png"] = (png_raw(5, 0, 8, 2, []), "invalid")
    bad["wide_1x100000.png"] = (png_raw(100000, 1, 1, 0, [b"\x00" * 12500]), "invalid")
    bad["bomb_60000x60000.png"] = (png_raw(60000, 60000, 1, 0, [b"\x00" * 7500]), "too_long")
    bad["just_over_cap.jpg"] = (jpg[:sof + 5] + struct.pack(">HH", 4000, 4001) + jpg[sof + 9:],
                                "too_long")
    return bad


CASES = [
    # name, file, settings overrides
    *[(n.split(".")[0] + "_" + n.split(".")[1], n, {}) for n in [
        "rgb.png", "rgba.png", "gray.png", "gray_alpha.png", "palette.png", "palette_trns.png",
        "bilevel.png", "gray16.png", "rgb16.png", "palette_short.png", "palette_4bit.png",
        "gray_2bit.png", "interlaced.png", "gray_alpha16.png", "rgba16.png", "exif6.png",
        "exif8_after.png", "rgb420.jpg", "rgb444.jpg", "rgb422.jpg", "gray.jpg", "cmyk.jpg",
        "progressive.jpg", *["exif%d.jpg" % o for o in range(1, 9)], "lossy.webp",
        "lossless.webp", "alpha_lossy.webp", "alpha_lossless.webp", "exif6.webp",
        "xmp6.jpg", "exif1_xmp6.jpg", "xmp5.webp", "xmp8_itxt.png", "xmp3_text.png",
        "tiny_1x1.png", "tiny_3x2.jpg", "wide_200x1.png", "tall_1x200.png", "tall_3x577.webp",
        "odd_333x97.jpg"]],
    ("huge_small_max", "huge_4000x4000.png", dict(max_pixels=1003520)),
    ("big_default", "big_1500x1000.jpg", {}),
    ("big_small_max", "big_1500x1000.jpg", dict(max_pixels=200704)),
    ("odd_small_min", "odd_333x97.jpg", dict(min_pixels=3136, max_pixels=12845056)),
    ("rgb_patch14", "rgb.png", dict(patch=14, min_pixels=3136, max_pixels=1003520)),
    ("rgb_demo_patch4", "rgb.png", dict(patch=4, min_pixels=1024, max_pixels=16384)),
    ("cmyk_t3_m1", "cmyk.jpg", dict(patch=8, temporal=3, merge=1, min_pixels=64,
                                    max_pixels=4096)),
]

# (src_w, src_h, dst_w, dst_h) for the resize-only check: up, down, mixed, extreme.
RESIZES = [(w, h, dw, dh) for (w, h) in [(1, 1), (7, 3), (64, 48), (333, 97), (1000, 10)]
           for (dw, dh) in [(1, 1), (2, 5), (32, 32), (64, 48), (65, 47), (129, 300), (480, 32),
                            (1024, 96), (3, 900)]]


# Processor config files (flat preprocessor_config.json, legacy min/max_pixels keys,
# transformers 5's processor_config.json with a nested "image_processor") and what
# transformers' image processor reads from them.
CONFIGS = {
    "qwen35_preprocessor_config.json": {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
        "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast"},
    "legacy_pixels.json": {
        "size": {"longest_edge": 1000000, "shortest_edge": 3136}, "min_pixels": 4096,
        "max_pixels": 802816, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711], "do_convert_rgb": True,
        "resample": 3, "rescale_factor": 0.00392156862745098},
    "nested_processor_config.json": {
        "image_processor": {"size": {"longest_edge": 200704, "shortest_edge": 1024},
                            "patch_size": 4, "temporal_patch_size": 2, "merge_size": 2,
                            "image_mean": 0.25, "image_std": 0.75, "rescale_factor": 0.0078125},
        "processor_class": "Qwen3VLProcessor"},
}


VIDEO_CONFIGS = {
    "qwen35_video_preprocessor_config.json": {
        "size": {"longest_edge": 25165824, "shortest_edge": 4096}, "patch_size": 16,
        "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5], "fps": 2, "min_frames": 4, "max_frames": 768,
        "processor_class": "Qwen3VLProcessor", "video_processor_type": "Qwen3VLVideoProcessor"},
    "nested_video_processor_config.json": {
        "video_processor": {"size": {"longest_edge": 786432, "shortest_edge": 131072},
                            "patch_size": 4, "fps": 1.5, "min_frames": 2, "max_frames": 64,
                            "image_mean": 0.25, "image_std": [0.5, 0.25, 0.125]},
        "processor_class": "Qwen3VLProcessor"},
}


def write_video_configs():
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    lines = []
    for name, cfg in VIDEO_CONFIGS.items():
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(cfg, f, indent=2)
        flat = cfg.get("video_processor", cfg)
        kw = {k: v for k, v in flat.items() if k not in ("processor_class", "video_processor_type")}
        p = Qwen3VLVideoProcessor(**kw)
        mean = p.image_mean if isinstance(p.image_mean, (list, tuple)) else [p.image_mean] * 3
        std = p.image_std if isinstance(p.image_std, (list, tuple)) else [p.image_std] * 3
        lines.append("%s %d %d %d %d %d %s %s %r %r %d %d" % (
            name, p.patch_size, p.temporal_patch_size, p.merge_size, p.size.shortest_edge,
            p.size.longest_edge, ",".join(repr(float(np.float32(v))) for v in mean),
            ",".join(repr(float(np.float32(v))) for v in std), float(p.rescale_factor),
            float(p.fps), p.min_frames, p.max_frames))
    with open(os.path.join(OUT, "video_configs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_configs():
    lines = []
    for name, cfg in CONFIGS.items():
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(cfg, f, indent=2)
        flat = cfg.get("image_processor", cfg)
        kw = {k: v for k, v in flat.items() if k not in ("processor_class", "image_processor_type")}
        p = Qwen2VLImageProcessorPil(**kw)
        mean = p.image_mean if isinstance(p.image_mean, (list, tuple)) else [p.image_mean] * 3
        std = p.image_std if isinstance(p.image_std, (list, tuple)) else [p.image_std] * 3
        lines.append("%s %d %d %d %d %d %s %s %r" % (
            name, p.patch_size, p.temporal_patch_size, p.merge_size, p.size["shortest_edge"],
            p.size["longest_edge"], ",".join(repr(float(np.float32(v))) for v in mean),
            ",".join(repr(float(np.float32(v))) for v in std), float(p.rescale_factor)))
    with open(os.path.join(OUT, "configs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    write_configs()
    write_video_configs()
    files = make_images()
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    bad = make_refusals(files)
    for name, (data, _) in bad.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    refusal_lines = []
    for name, (data, status) in bad.items():
        try:  # what Pillow does with it, for the record (clef refuses every one)
            np.asarray(load_image(os.path.join(OUT, name)))
            pillow = "pillow-decodes"
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
            pillow = "pillow-refuses"
        refusal_lines.append("%s %s %s\n" % (name, status, pillow))
    with open(os.path.join(OUT, "refusals.txt"), "w") as f:
        f.write("".join(refusal_lines))
    lines = []
    for name, fname, over in CASES:
        s = dict(QWEN35, **over)
        path = os.path.join(OUT, fname)
        decoded = load_image(path)  # exif_transpose + convert("RGB"), as the processor gets it
        d = np.asarray(decoded)
        h, w = d.shape[:2]
        rh, rw = smart_resize(h, w, factor=s["patch"] * s["merge"], min_pixels=s["min_pixels"],
                              max_pixels=s["max_pixels"])
        resized = np.asarray(decoded.resize((rw, rh), Image.BICUBIC))
        proc = Qwen2VLImageProcessorPil(
            patch_size=s["patch"], temporal_patch_size=s["temporal"], merge_size=s["merge"],
            size={"shortest_edge": s["min_pixels"], "longest_edge": s["max_pixels"]},
            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
        out = proc(images=[decoded], return_tensors="np")
        pv = np.asarray(out["pixel_values"], dtype=np.float32)
        grid = [int(v) for v in out["image_grid_thw"][0]]
        assert grid[1] * s["patch"] == rh and grid[2] * s["patch"] == rw, name
        flat = pv.reshape(-1)
        picks = sorted({0, flat.size - 1, *range(7, flat.size, max(1, flat.size // 13))})[:16]
        samples = " ".join("%d %r" % (i, float(flat[i])) for i in picks)
        lines.append("%s %s %d %d %d %d %d %d %d %s %d %d %s %d %d %d %s %d %s" % (
            name, fname, s["patch"], s["temporal"], s["merge"], s["min_pixels"], s["max_pixels"],
            w, h, sha(d), rw, rh, sha(resized), grid[0], grid[1], grid[2],
            sha(pv.astype("<f4")), len(picks), samples))
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    lines = []
    for name, fname, over in CASES:
        s = dict(QWEN35, **over)
        decoded = load_image(os.path.join(OUT, fname))
        proc = Qwen2VLImageProcessor(
            patch_size=s["patch"], temporal_patch_size=s["temporal"], merge_size=s["merge"],
            size={"shortest_edge": s["min_pixels"], "longest_edge": s["max_pixels"]},
            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
        out = proc(images=[decoded], return_tensors="pt")
        grid = [int(v) for v in out["image_grid_thw"][0]]
        pv = out["pixel_values"].numpy().astype("<f4")
        lines.append("%s %s %d %d %d %d %d %d %d %d %s" % (
            name, fname, s["patch"], s["temporal"], s["merge"], s["min_pixels"], s["max_pixels"],
            grid[0], grid[1], grid[2], sha(pv)))
    with open(os.path.join(OUT, "cases_torchvision.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    lines = []
    for w, h, dw, dh in RESIZES:
        r = np.asarray(synthetic(w, h).resize((dw, dh), Image.BICUBIC))
        lines.append("%d %d %d %d %s" % (w, h, dw, dh, sha(r)))
    with open(os.path.join(OUT, "resize.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    total = sum(len(v) for v in files.values())
    print("wrote %d images (%d bytes), %d processor cases, %d resizes to %s" % (
        len(files), total, len(CASES), len(RESIZES), OUT))


if __name__ == "__main__":
    main()
