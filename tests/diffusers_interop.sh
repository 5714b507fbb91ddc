#!/bin/sh
# diffusers_interop.sh BUILD REPO — tests/diffusers_interop.py against the real diffusers.
#
# diffusers and safetensors come from PyPI into a venv made with --system-site-packages, so
# Debian's PyTorch 1.13 (python3-torch) stays the torch they run on. The pins are versions
# that install and run on torch 1.13 and Python 3.11 (diffusers 0.31.0 was checked; later ones
# may need a newer torch). The venv is made once per build directory and remade when the
# pins change. Exit 77 (ctest: skipped, never passed) only where it cannot be installed.
set -u
BUILD=$1
REPO=$2
VENV=${SG_DIFFUSERS_VENV:-$BUILD/diffusers-venv}
PINS="diffusers==0.31.0 safetensors==0.4.5 huggingface_hub==0.26.2"
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
    echo "diffusers_interop: no /usr/bin/python3 with torch and numpy (python3-torch): skipped"
    exit 77
fi
if [ "$(cat "$VENV/pins" 2>/dev/null)" != "$PINS" ]; then
    rm -rf "$VENV"
    if ! /usr/bin/python3 -m venv --system-site-packages "$VENV"; then
        echo "diffusers_interop: cannot create a venv (python3-venv missing?): skipped"
        exit 77
    fi
    # shellcheck disable=SC2086
    if ! "$VENV/bin/pip" install --disable-pip-version-check -q $PINS; then
        echo "diffusers_interop: cannot install $PINS (no access to PyPI?): skipped"
        rm -rf "$VENV"
        exit 77
    fi
    echo "$PINS" >"$VENV/pins"
fi
exec "$VENV/bin/python" "$REPO/tests/diffusers_interop.py" "$BUILD" "$REPO"
