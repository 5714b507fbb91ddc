#!/usr/bin/env python3
"""make_pngs.py DIR COUNT W0 DW H: COUNT random RGB PNGs DIR/img<i>.png, image i W0 + DW i wide
and H high (seed 3: the same bytes every run), written with the standard library alone, for the
tests of --data folder:DIR (train, verify, bench)."""
import os
import random
import struct
import sys
import zlib


def png(path, w, h):
    raw = b"".join(b"\0" + bytes(random.randrange(256) for _ in range(3 * w)) for _ in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: make_pngs.py DIR COUNT W0 DW H")
    d, (n, w0, dw, h) = sys.argv[1], map(int, sys.argv[2:])
    random.seed(3)
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        png(f"{d}/img{i}.png", w0 + dw * i, h)


if __name__ == "__main__":
    main()
