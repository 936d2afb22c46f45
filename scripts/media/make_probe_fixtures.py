#!/usr/bin/env python3
"""make_probe_fixtures.py — small image files for src/media's header probe and refusals.

Writes tests/media/fixtures/probe/: images saved by Pillow (pinned, scripts/requirements.txt)
in the modes and formats requests bring (PNG RGB/RGBA/L/LA/P/16-bit, JPEG RGB/L/CMYK/progressive
with EXIF, WebP lossy/lossless/alpha/VP8X) plus images the engine must refuse (0x0 declared,
1x100000, a decompression bomb declaring 100000x100000 in 60 bytes, truncated headers), and
probe.txt: one line per file, "<file> <width> <height>" with Pillow's Image.size as the oracle,
or "<file> refused <status>" with the status clef must give (invalid = 422, too_long = 413).
Deterministic; run from the repository root: ${PYTHON:-python3} scripts/media/make_probe_fixtures.py
"""
import io
import os
import struct
import zlib

from PIL import Image

OUT = os.path.join("tests", "media", "fixtures", "probe")


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_only(w, h):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IEND", b"")


def gradient(mode, w, h):
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 255) // max(w - 1, 1), (y * 255) // max(h - 1, 1), (x + y) % 256)
                 for y in range(h) for x in range(w)])
    return img.convert(mode)


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []

    def save(name, img, fmt, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(buf.getvalue())
        back = Image.open(io.BytesIO(buf.getvalue()))
        lines.append("%s %d %d" % (name, back.size[0], back.size[1]))

    save("rgb.png", gradient("RGB", 37, 21), "PNG")
    save("rgba.png", gradient("RGBA", 20, 33), "PNG")
    save("gray.png", gradient("L", 64, 3), "PNG")
    save("gray_alpha.png", gradient("LA", 5, 9), "PNG")
    save("palette.png", gradient("P", 31, 17), "PNG")
    save("gray16.png", gradient("I;16", 12, 7), "PNG")
    save("tall.png", gradient("L", 1, 200), "PNG")
    save("rgb.jpg", gradient("RGB", 45, 30), "JPEG", quality=90)
    save("gray.jpg", gradient("L", 17, 40), "JPEG")
    save("cmyk.jpg", gradient("CMYK", 26, 19), "JPEG")
    save("progressive.jpg", gradient("RGB", 50, 20), "JPEG", progressive=True)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 (the probe reports the stored size)
    save("exif_rot.jpg", gradient("RGB", 40, 24), "JPEG", exif=exif.tobytes())
    save("lossy.webp", gradient("RGB", 33, 18), "WEBP", quality=80)
    save("lossless.webp", gradient("RGB", 19, 29), "WEBP", lossless=True)
    save("alpha.webp", gradient("RGBA", 22, 14), "WEBP", quality=80)
    save("exif.webp", gradient("RGB", 16, 24), "WEBP", exif=exif.tobytes())

    def refused(name, data, status):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        lines.append("%s refused %s" % (name, status))

    refused("bomb.png", png_header_only(100000, 100000), "too_long")
    refused("over_16mp.png", png_header_only(4001, 4000), "too_long")
    refused("zero.png", png_header_only(0, 0), "invalid")
    buf = io.BytesIO()
    gradient("L", 100000, 1).save(buf, "PNG")
    refused("wide_1x100000.png", buf.getvalue(), "invalid")
    with open(os.path.join(OUT, "rgb.png"), "rb") as f:
        refused("truncated.png", f.read()[:20], "invalid")
    with open(os.path.join(OUT, "rgb.jpg"), "rb") as f:
        jpg = f.read()
    sof = jpg.index(b"\xff\xc0")
    refused("truncated.jpg", jpg[:sof + 4], "invalid")
    with open(os.path.join(OUT, "lossy.webp"), "rb") as f:
        refused("truncated.webp", f.read()[:22], "invalid")

    with open(os.path.join(OUT, "probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
