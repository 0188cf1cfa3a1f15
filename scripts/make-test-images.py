#!/usr/bin/env python3
"""make-test-images.py - writes the small PNG test files of tests/data/ and the
PNG seeds of fuzz/corpus/image/, deterministically, with the Python standard
library only (zlib + struct): no image library is involved, so the pixel
values are known from the formulas below, which tests/test-image.c repeats.

Usage: python3 scripts/make-test-images.py [REPO_ROOT]

Sample formula (the tests compute the same): for pixel (x, y), channel c,
    s8(x, y, c)  = (x*37 + y*101 + c*53 + 7) % 256
    s16(x, y, c) = ((x*9973 + y*30011 + c*7919) * 13 + 11) % 65536
and a depth-d (d < 8) sample is s8(x, y, c) % 2**d. The grey 16-bit image
overrides row 0 with 0, 60, 120, ... so that values below and above 255 both
occur (PIL clips I;16 to 255 on conversion to RGB).
"""
import os
import struct
import sys
import zlib


def s8(x, y, c):
    return (x * 37 + y * 101 + c * 53 + 7) % 256


def s16(x, y, c):
    return ((x * 9973 + y * 30011 + c * 7919) * 13 + 11) % 65536


def grey16(x, y):
    return x * 60 if y == 0 else s16(x, y, 0)


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def pack_row(samples, depth):
    """Packs one row of samples (already in file order) at `depth` bits."""
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    out, acc, nbits = bytearray(), 0, 0
    for s in samples:
        acc = (acc << depth) | s
        nbits += depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png(w, h, depth, color, pixel, extra_before_idat=b"", interlace=False, plte=None, trns=None):
    """pixel(x, y) -> list of samples for that pixel, in file channel order."""
    raw = bytearray()
    if not interlace:
        for y in range(h):
            row = [s for x in range(w) for s in pixel(x, y)]
            raw += b"\x00" + pack_row(row, depth)
    else:
        for x0, y0, dx, dy in ADAM7:
            xs = list(range(x0, w, dx))
            if not xs:
                continue
            for y in range(y0, h, dy):
                row = [s for x in xs for s in pixel(x, y)]
                raw += b"\x00" + pack_row(row, depth)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 1 if interlace else 0)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    if plte is not None:
        out += chunk(b"PLTE", bytes(v for rgb in plte for v in rgb))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    out += extra_before_idat
    out += chunk(b"IDAT", zlib.compress(bytes(raw), 9))
    return out + chunk(b"IEND", b"")


def exif_orientation(value, little_endian=True):
    """A minimal TIFF block: IFD0 with one Orientation (0x0112, SHORT) entry."""
    e = "<" if little_endian else ">"
    head = (b"II*\x00" if little_endian else b"MM\x00*") + struct.pack(e + "I", 8)
    entry = struct.pack(e + "HHI", 0x0112, 3, 1) + struct.pack(e + "HH", value, 0)
    return head + struct.pack(e + "H", 1) + entry + struct.pack(e + "I", 0)


# The palette: 10 entries; indices 10.. are out of range (PIL shows them as grey (i, i, i)).
PAL = [((i * 29 + 3) % 256, (i * 71 + 5) % 256, (i * 113 + 9) % 256) for i in range(10)]


def files():
    w, h = 7, 5
    yield "grey1.png", png(w, h, 1, 0, lambda x, y: [s8(x, y, 0) % 2])
    yield "grey2.png", png(w, h, 2, 0, lambda x, y: [s8(x, y, 0) % 4])
    yield "grey4.png", png(w, h, 4, 0, lambda x, y: [s8(x, y, 0) % 16])
    yield "grey8.png", png(w, h, 8, 0, lambda x, y: [s8(x, y, 0)])
    yield "grey16.png", png(w, h, 16, 0, lambda x, y: [grey16(x, y)])
    yield "grey8-trns.png", png(w, h, 8, 0, lambda x, y: [s8(x, y, 0)], trns=struct.pack(">H", s8(1, 1, 0)))
    yield "ga8.png", png(w, h, 8, 4, lambda x, y: [s8(x, y, 0), s8(x, y, 1)])
    yield "ga16.png", png(w, h, 16, 4, lambda x, y: [s16(x, y, 0), s16(x, y, 1)])
    yield "rgb8.png", png(w, h, 8, 2, lambda x, y: [s8(x, y, c) for c in range(3)])
    yield "rgb16.png", png(w, h, 16, 2, lambda x, y: [s16(x, y, c) for c in range(3)])
    yield "rgba8.png", png(w, h, 8, 6, lambda x, y: [s8(x, y, c) for c in range(4)])
    yield "rgba16.png", png(w, h, 16, 6, lambda x, y: [s16(x, y, c) for c in range(4)])
    yield "pal8.png", png(w, h, 8, 3, lambda x, y: [s8(x, y, 0) % 12], plte=PAL,
                          trns=bytes([0, 128, 255, 7]))
    yield "pal4.png", png(w, h, 4, 3, lambda x, y: [s8(x, y, 0) % 10], plte=PAL)
    yield "pal1.png", png(w, h, 1, 3, lambda x, y: [s8(x, y, 0) % 2], plte=PAL[:2])
    yield "rgb8-adam7.png", png(9, 7, 8, 2, lambda x, y: [s8(x, y, c) for c in range(3)], interlace=True)
    yield "rgb8-exif6.png", png(w, h, 8, 2, lambda x, y: [s8(x, y, c) for c in range(3)],
                                extra_before_idat=chunk(b"eXIf", exif_orientation(6)))
    yield "rgb8-exif8-mm.png", png(w, h, 8, 2, lambda x, y: [s8(x, y, c) for c in range(3)],
                                   extra_before_idat=chunk(b"eXIf", exif_orientation(8, False)))
    # The golden image with alpha (tests/golden/, vision_goldens.py): 257x181 RGBA, smooth gradients with a
    # varying alpha, small enough to keep, odd sizes so that smart_resize upsamples it (to 224x320).
    gw, gh = 257, 181
    yield "alpha-257x181.png", png(gw, gh, 8, 6, lambda x, y: [
        (x * 255) // (gw - 1), (y * 255) // (gh - 1), ((x + y) * 3) % 256, (x * y) % 256])


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    data = os.path.join(root, "tests", "data")
    corpus = os.path.join(root, "fuzz", "corpus", "image")
    os.makedirs(data, exist_ok=True)
    os.makedirs(corpus, exist_ok=True)
    for name, blob in files():
        with open(os.path.join(data, name), "wb") as f:
            f.write(blob)
        if name != "alpha-257x181.png":
            with open(os.path.join(corpus, name), "wb") as f:
                f.write(blob)
        print(f"{name}: {len(blob)} bytes")


if __name__ == "__main__":
    main()
