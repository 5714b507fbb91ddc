#!/usr/bin/env python3
"""test_kernel_entry.py: every CUDA kernel of kernels/cuda begins with SG_PDL_ENTER().

Programmatic dependent launch (kernels/cuda/cuda_kernels.h, SG_PDL=1) lets a kernel start
while the one before it drains; a kernel launched that way must wait (griddepcontrol.wait,
inside SG_PDL_ENTER) before it touches memory, or it races. The host emulation checks the
kernels the host tests launch; this checks the text of every one, launched there or not: the
first statement of each __global__ function's body is SG_PDL_ENTER();.
Usage: test_kernel_entry.py SOURCE_DIR
"""
import glob
import os
import re
import sys


def strip_comments(s):
    """Comments replaced by spaces of the same length (offsets, lines kept)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, s, flags=re.S)


def kernels(text):
    """(name, line, first statement) of each __global__ function definition."""
    out = []
    for m in re.finditer(r"\b__global__\b", text):
        k, depth = m.end(), 0
        while k < len(text):
            c = text[k]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif depth == 0 and c in ";{":
                break
            k += 1
        if k >= len(text) or text[k] == ";":
            continue  # a declaration
        head = text[m.end():k]
        names = re.findall(r"([A-Za-z_]\w*)\s*\(", head)
        names = [n for n in names if n not in ("__launch_bounds__", "__maxnreg__")]
        body = text[k + 1:]
        first = body.lstrip().split(";", 1)[0].strip() + ";"
        out.append((names[0] if names else "?", text.count("\n", 0, m.start()) + 1, first))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    files = sorted(glob.glob(os.path.join(root, "kernels", "cuda", "*.cu")) +
                   glob.glob(os.path.join(root, "kernels", "cuda", "*.cuh")))
    n = bad = 0
    for f in files:
        for name, line, first in kernels(strip_comments(open(f).read())):
            n += 1
            if re.sub(r"\s+", "", first) != "SG_PDL_ENTER();":
                bad += 1
                print("FAIL %s:%d: kernel %s begins with '%s', not SG_PDL_ENTER();"
                      % (os.path.relpath(f, root), line, name, first[:60]))
    if n == 0:
        print("FAIL no kernels found under kernels/cuda")
        return 1
    if not bad:
        print("kernel entry: all %d kernels of kernels/cuda begin with SG_PDL_ENTER()" % n)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
