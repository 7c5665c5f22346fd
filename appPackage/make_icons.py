"""Draws the Teams app icons: color.png (192x192, full colour) and outline.png (32x32, white on transparent).

Run it only to redraw them (the PNGs are committed): ``./run python appPackage/make_icons.py``. It needs
Pillow, which is not a dependency of the bot: ``./run python -m pip install pillow`` first.

The motif is a shield (security) holding a magnifying glass (search over the workspace). Shapes are drawn
at 8x and scaled down, so the colour icon has smooth edges. The outline icon follows Teams' rule for it:
every pixel is either pure opaque white or fully transparent, so its scaled-down coverage is thresholded
rather than blended.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ACCENT = (0x12, 0x3B, 0x6B)  # the manifest's accentColor (#123B6B): the colour icon's background
LENS = (0x9C, 0xC8, 0xF2)
WHITE = (255, 255, 255)
SCALE = 8  # drawing resolution relative to the final size


def shield(cx: float, top: float, width: float, height: float, steps: int = 48) -> list[tuple[float, float]]:
    """A shield outline: a flat, slightly peaked top, straight upper sides and curved lower sides to a point."""
    half = width / 2
    shoulder = top + height * 0.10  # where the top edge meets the sides
    waist = top + height * 0.50  # where the sides start curving in
    bottom = top + height
    right: list[tuple[float, float]] = [(cx, top), (cx + half, shoulder), (cx + half, waist)]
    for i in range(1, steps + 1):  # quadratic curve from the waist to the point, bulging outwards
        t = i / steps
        control = (cx + half, top + height * 0.82)
        x = (1 - t) ** 2 * (cx + half) + 2 * (1 - t) * t * control[0] + t * t * cx
        y = (1 - t) ** 2 * waist + 2 * (1 - t) * t * control[1] + t * t * bottom
        right.append((x, y))
    left = [(2 * cx - x, y) for x, y in reversed(right[1:-1])]
    return right + left


def handle(cx: float, cy: float, radius: float, length: float, width: float) -> list[tuple[float, float]]:
    """The magnifier's handle: a bar leaving the lens towards the lower right, at 45 degrees."""
    angle = math.radians(45)
    dx, dy = math.cos(angle), math.sin(angle)
    nx, ny = -dy * width / 2, dx * width / 2
    start = (cx + dx * radius * 0.92, cy + dy * radius * 0.92)
    end = (start[0] + dx * length, start[1] + dy * length)
    return [(start[0] + nx, start[1] + ny), (end[0] + nx, end[1] + ny),
            (end[0] - nx, end[1] - ny), (start[0] - nx, start[1] - ny)]


def scaled(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(x * SCALE, y * SCALE) for x, y in points]


def circle(cx: float, cy: float, radius: float) -> tuple[float, float, float, float]:
    return ((cx - radius) * SCALE, (cy - radius) * SCALE, (cx + radius) * SCALE, (cy + radius) * SCALE)


def color_icon(Image, ImageDraw):  # type: ignore[no-untyped-def]
    """192x192, full bleed: Teams masks the corners itself; the logo stays inside the central 120x120."""
    size = 192
    image = Image.new("RGB", (size * SCALE, size * SCALE), ACCENT)
    draw = ImageDraw.Draw(image)
    draw.polygon(scaled(shield(96, 38, 100, 118)), fill=WHITE)
    lens_x, lens_y, lens_r = 90, 88, 22
    draw.polygon(scaled(handle(lens_x, lens_y, lens_r, 22, 9)), fill=ACCENT)
    draw.ellipse(circle(lens_x, lens_y, lens_r), fill=ACCENT)
    draw.ellipse(circle(lens_x, lens_y, lens_r - 7), fill=LENS)
    return image.resize((size, size), Image.Resampling.LANCZOS).convert("RGBA")


def outline_icon(Image, ImageDraw):  # type: ignore[no-untyped-def]
    """32x32: a white shield outline with a white magnifier inside, on a transparent background."""
    size = 32
    mask = Image.new("L", (size * SCALE, size * SCALE), 0)
    draw = ImageDraw.Draw(mask)
    draw.polygon(scaled(shield(16, 1.5, 25, 29)), fill=255)
    draw.polygon(scaled(shield(16, 4.0, 19.5, 23.5)), fill=0)  # hollow: a stroke of about 2.5 px
    lens_x, lens_y, lens_r = 15, 14, 5
    draw.ellipse(circle(lens_x, lens_y, lens_r), fill=255)
    draw.ellipse(circle(lens_x, lens_y, lens_r - 2), fill=0)
    draw.polygon(scaled(handle(lens_x, lens_y, lens_r, 6, 2.8)), fill=255)
    coverage = mask.resize((size, size), Image.Resampling.BOX)
    solid = coverage.point(lambda value: 255 if value >= 128 else 0)
    # Transparent pixels are white too (alpha 0), so no checker can read them as another colour.
    image = Image.new("RGBA", (size, size), WHITE + (0,))
    image.putalpha(solid)
    return image


def main() -> int:
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        print("Drawing the icons needs Pillow: ./run python -m pip install pillow", file=sys.stderr)
        return 2
    for name, draw in (("color.png", color_icon), ("outline.png", outline_icon)):
        path = HERE / name
        draw(Image, ImageDraw).save(path, format="PNG", optimize=True)
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
