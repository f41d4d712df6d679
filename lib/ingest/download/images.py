"""Image processing for downloaded bytes: decode with pillow under a pixel cap,
apply EXIF orientation, resize (none | keep_ratio | center_crop | border) and
re-encode (jpeg | png | webp). Pure and deterministic: same bytes and settings,
same output bytes.
"""
from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps

BORDER_COLOR = (255, 255, 255)
RESAMPLE = Image.Resampling.LANCZOS
REDUCING_GAP = 3.0   # reduce by integer steps first, then Lanczos: fast and still sharp


class ImageFailure(Exception):
    """An image that cannot be used; `status` is the row's failure class."""

    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status, self.error = status, error


@dataclass
class ProcessedImage:
    data: bytes
    width: int
    height: int
    original_width: int
    original_height: int
    original_format: str
    sha256: str            # of the original bytes as downloaded


def _to_rgb_or_rgba(img: Image.Image, *, keep_alpha: bool) -> Image.Image:
    """RGB, or RGBA when the image has transparency and the output format keeps it;
    JPEG output composites transparency onto white."""
    has_alpha = img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
    if not has_alpha:
        return img if img.mode == "RGB" else img.convert("RGB")
    rgba = img if img.mode == "RGBA" else img.convert("RGBA")
    if keep_alpha:
        return rgba
    bg = Image.new("RGB", rgba.size, BORDER_COLOR)
    bg.paste(rgba, mask=rgba.getchannel("A"))
    return bg


def _target_size(w: int, h: int, size: int, mode: str) -> tuple[int, int]:
    if mode == "keep_ratio":
        if max(w, h) <= size:
            return w, h
        scale = size / max(w, h)
        return max(1, round(w * scale)), max(1, round(h * scale))
    return size, size


def process_image(body: bytes, *, max_pixels: int, resize_mode: str, size: int,
                  fmt: str, quality: int) -> ProcessedImage:
    """Decode, orient, resize and re-encode `body`. Raises ImageFailure with status
    `too_many_pixels` (decompression bomb), `decode_error` or `not_image`.
    keep_ratio fits the longer side into `size` (never enlarges); center_crop fills
    a size x size square and crops the middle; border fits inside the square and
    pads with white; none keeps the decoded size."""
    sha = hashlib.sha256(body).hexdigest()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(body))
            fmt_in = (img.format or "").lower()
            w0, h0 = img.size
            if max_pixels and w0 * h0 > max_pixels:
                raise ImageFailure("too_many_pixels", f"{w0}x{h0} = {w0 * h0} pixels > image_max_pixels {max_pixels}")
            if resize_mode != "none" and img.format == "JPEG":
                # JPEG can decode at 1/2, 1/4, 1/8 scale: ask for the smallest that still covers the target
                s = size / (min(w0, h0) if resize_mode == "center_crop" else max(w0, h0))
                if s < 1:
                    img.draft("RGB", (max(1, int(w0 * s + 0.999)), max(1, int(h0 * s + 0.999))))
            img.load()
    except ImageFailure:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageFailure("too_many_pixels", str(exc)) from None
    except Image.UnidentifiedImageError:
        raise ImageFailure("decode_error", "pillow cannot identify the image format") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise ImageFailure("decode_error", f"{type(exc).__name__}: {exc}") from None
    try:
        img = ImageOps.exif_transpose(img)
    except Exception:   # broken EXIF block: keep the pixels as decoded
        pass
    img = _to_rgb_or_rgba(img, keep_alpha=fmt != "jpeg")
    w, h = img.size
    if resize_mode == "keep_ratio":
        tw, th = _target_size(w, h, size, resize_mode)
        if (tw, th) != (w, h):
            img = img.resize((tw, th), RESAMPLE, reducing_gap=REDUCING_GAP)
    elif resize_mode == "center_crop":
        scale = size / min(w, h)
        cw, ch = size / scale, size / scale            # the source box that becomes the square
        box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
        img = img.resize((size, size), RESAMPLE, box=box, reducing_gap=REDUCING_GAP)
    elif resize_mode == "border":
        scale = size / max(w, h)
        tw, th = max(1, round(w * scale)), max(1, round(h * scale))
        fitted = img.resize((tw, th), RESAMPLE, reducing_gap=REDUCING_GAP) if (tw, th) != (w, h) else img
        canvas = Image.new(img.mode, (size, size), BORDER_COLOR + ((255,) if img.mode == "RGBA" else ()))
        canvas.paste(fitted, ((size - tw) // 2, (size - th) // 2))
        img = canvas
    out = io.BytesIO()
    if fmt == "jpeg":
        img.save(out, "JPEG", quality=quality, optimize=False)
    elif fmt == "webp":
        img.save(out, "WEBP", quality=quality, method=4)
    else:
        img.save(out, "PNG", compress_level=6)
    return ProcessedImage(out.getvalue(), img.size[0], img.size[1], w0, h0, fmt_in, sha)
