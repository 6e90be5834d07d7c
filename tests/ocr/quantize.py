#!/usr/bin/env python3
"""The text detector in 8-bit integers (issue 31): PP-OCRv6's detection model, quantised by
onnxruntime's own tool (`onnxruntime.quantization.quantize_static`, QDQ format: unsigned 8-bit
activations, signed 8-bit weights per channel), calibrated on the repository's handwritten page
images as nib feeds them to the detector.

    quantize.py --model det.onnx --out det.int8.onnx PAGE.png [PAGE.png ...]

The calibration pages are prepared as `shared/ocr/src/paddle.rs` prepares a page: grey, scaled
(bilinear) so its longer side is at most 960 px, each side rounded to a multiple of 32, the
grey value v given as v / 127.5 - 1 in all three channels. The model is first converted to
opset 13, where DequantizeLinear takes per-channel scales. MinMax calibration over the same
pages and the same onnxruntime give the same bytes.

Why: the detector ran ~0.75 CPU seconds a page at 960 px, about half of the engine's time on
a page; in 8 bits it runs ~0.24 (VNNI on x86-64, dot-product instructions on arm64). The
recognition model stays in floating point (8 bits saved it only a quarter).
docs/decisions/0059-ocr-int8-detector.md has the measurements.
"""

import argparse
import os
import sys

import numpy as np
from PIL import Image

MAX_SIDE = 960


def round32(v):
    return max(32, int(round(v / 32.0)) * 32)


def det_input(path):
    page = Image.open(path).convert("L")
    w, h = page.size
    scale = min(MAX_SIDE / max(w, h), 1.0)
    size = (round32(w * scale), round32(h * scale))
    grey = np.asarray(page.resize(size, Image.BILINEAR), dtype=np.float32) / 127.5 - 1.0
    return np.repeat(grey[None, None], 3, axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()

    import onnx
    from onnx import version_converter
    from onnxruntime import InferenceSession
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod,
                                          QuantFormat, QuantType, quantize_static)

    # Per-channel scales need DequantizeLinear's `axis`, from opset 13 (the model is opset 11).
    model = onnx.load(args.model)
    if model.opset_import[0].version < 13:
        model = version_converter.convert_version(model, 13)
    upgraded = args.out + ".opset13.onnx"
    onnx.save(model, upgraded)
    name = InferenceSession(upgraded, providers=["CPUExecutionProvider"]).get_inputs()[0].name

    class Pages(CalibrationDataReader):
        def __init__(self):
            self.left = list(args.pages)

        def get_next(self):
            return {name: det_input(self.left.pop(0))} if self.left else None

    quantize_static(upgraded, args.out, Pages(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True, calibrate_method=CalibrationMethod.MinMax)
    os.remove(upgraded)
    print(f"quantize: {args.out} from {args.model}, calibrated on {len(args.pages)} pages",
          file=sys.stderr)


if __name__ == "__main__":
    main()
