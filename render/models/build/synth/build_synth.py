"""Build render/models/synth/mouth_palette.onnx and mouth_synth.onnx: the built-in lip-sync synthesis.

    python3 -m venv /tmp/synthvenv && /tmp/synthvenv/bin/pip install -r render/models/build/synth/requirements.txt
    /tmp/synthvenv/bin/python render/models/build/synth/build_synth.py [OUT_DIR]

No learned weights: the graphs are hand-written geometry and shading, so they
are small (tens of KB), deterministic and run the same on onnxruntime's CPU
and CUDA providers (opset 17, only standard ops).

Contract (mirrored in render/synth/contract.ts; keep them in step):

mouth_palette.onnx, what the mouth needs of a frame's pixels (run once per frame: the engine keeps it)
  crop    uint8   [N,S,S,4]  RGBA (nearest pixel), a square crop rotated so the mouth corners lie on
                             a horizontal line; only its size (S) and the pixels inside the key points'
                             box widened by a fifth of the mouth's width each side and a tenth above and
                             below are read (synthReadRegion in contract.ts)
  lips    float32 [N,42,2]   key points in crop-normalised coords ([0,1] across the crop, x right, y down):
                               0..19  inner lip loop (MediaPipe 78,191,80,81,82,13,312,311,310,415,
                                      308,324,318,402,317,14,87,178,88,95): corner, 9 upper, corner, 9 lower
                               20..39 outer lip loop (61,185,40,39,37,0,267,269,270,409,
                                      291,375,321,405,314,17,84,181,91,146), same order
                               40     chin (152)
                               41     base of the nose (2)
  palette float32 [N,P]      PALETTE_FIELDS below, in order

mouth_synth.onnx, the mouth in a shape (per frame)
  lips     float32 [N,42,2]   as above
  shape    float32 [N,6]      (open 0..1, wide -1..1, round 0..1, press 0..1, tuck 0..1, relax 0..1);
                              all 0 leaves the crop as it is
  palette  float32 [N,P]      each item's, from mouth_palette.onnx
  size     int64   [1]        S, the crop's edge
  warp     float32 [N,2,w,w]  backward warp over the crop's middle window (w = S - 2*floor(S/10)): where
                              each pixel takes its colour from, (du, dv) in crop pixels; exactly 0 where
                              it moved under 0.05 px. The composite samples the full-resolution frame there.
  inner    float32 [N,4,h,k]  the drawn inner mouth and the shading of the inner lip margins, rgb in
                              frame levels premultiplied by its coverage, and the coverage, over the
                              rows/columns holding every opening of the batch and its lips' margins
  inner_at int64   [2]        crop pixel (row, column) of inner's first pixel

Design, in the mouth's own frame (x along the corners, y down); lengths in
mouth widths W (outer corner to outer corner). The shape is articulatory:

  open   the lips part (quickly, over the first 0.3) and the jaw drops (from
         0.1 on): small openings show the teeth together, as in s, t, ee;
  wide   the corners move out (spread, ee) or in (negative);
  round  the corners move in, the lips get fuller (pushed forward) and the
         opening narrows to a small round one (oo, w);
  press  the lips press together and thin (m, b, p); a portrait that shows its
         teeth (or is caught open mid-speech) closes its lips over them;
  tuck   the upper lip lifts and the lower lip rises under the upper teeth (f, v);
         on a portrait that shows its teeth, up to their edge;
  relax  a smiling portrait's corners come down towards neutral while it
         talks (the caller raises it over an utterance and lets it fall in silence).

  1. The palette graph measures the portrait once: the lips' colour and each
     lip's near its inner edge, the skin's, the light's side, the darkest
     colour between the lips (a closed mouth's crease, an open one's corners)
     as the cavity's reference; down the middle, the crease (the lip line
     moves onto its darkest row), the photograph's blur (its steepest step),
     and, when the portrait shows its teeth, where its upper lip really ends
     and where its upper teeth do (the largest fall of luminance down the
     opening, over five columns; in a mouth caught open mid-speech, where
     the largest is the lower teeth's edge, the first large one from the
     top). From these, the teeth's, cavity's and
     tongue's colours: the portrait's own teeth, or the skin's cast at a
     fixed small strength, a little lighter than the skin; the tongue redder
     than the lips.
  2. Lip curves per column: the inner and outer upper and lower lip lines,
     interpolated across the columns (Gaussian-weighted, Nadaraya-Watson) from
     the 11 points of each.
  3. A backward warp (output pixel -> source pixel), so every output pixel is
     defined; the composite (render/synth/image.ts) resamples the frame itself
     along it, so lips, skin, wrinkles and beard keep their own texture:
       - a corner field (out with wide, in with round and press, down with
         relax in proportion to the smile), fading into the cheeks;
       - per column, a piecewise map with knots at the lip lines: each lip
         keeps its thickness and colour (fuller with round, thinner with
         press) and moves as one piece; the upper lip lifts a little, fading
         at the nose; the lower lip drops with a profile that opens from the
         centre out (the corners stay sealed at small openings) and blends into
         the jaw's broad drop at the chin, fading over the neck; the lips' outer
         edges follow a broader profile, so no skin is sheared at the opening's ends;
       - the lips' inner edges sample just beyond the crease (by the
         photograph's blur), so the crease never rims them;
       - a portrait that shows its teeth keeps them: its upper teeth stay with
         the skull (following neither the lip nor the corners), the part of
         its opening below the occlusal line goes down with the lower lip (in
         a mouth caught open mid-speech its own tongue and lower teeth, over
         which nothing is drawn).
  4. A drawn layer in the new space, opaque, its edges as soft as the
     photograph's: a cavity from the portrait's own darks, warm, darkest at
     the back and towards the corners; the tongue behind the lower teeth, lit
     at its front; upper teeth fixed to the skull, their widths on a dental
     arch (central : lateral : canine about 1.5 : 1 : 0.8), the incisal edge
     on a smile arc, rounded tooth corners, a shadow under the upper lip and
     darker towards the corners, shaded from the light's side; lower teeth on
     the jaw, shown only at wide openings, lit at their edge; each lip's wet
     inner face at the opening's edge in its own colour, darker. A fixed
     grain, attached to the face, matches the drawn pixels to the
     photograph's (as strong as its own on its smoothest skin, weaker in
     the dark).
  5. The inner lip margins: a soft shadow inside the upper lip's edge, a
     moist highlight along the lower lip's, which turns inward in shade at its
     edge, only where the lips are apart.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_dsl import Graph, concat, lerp, smoothstep, smoothsteps, where  # noqa: E402
from hoist import hoist_face_constants  # noqa: E402

K = 42
SHAPE_PARAMS = 6
INNER_UPPER = list(range(0, 11))  # corner, 9 upper, corner
INNER_LOWER = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0]
OUTER_UPPER = [20 + i for i in INNER_UPPER]
OUTER_LOWER = [20 + i for i in INNER_LOWER]
CHIN, NOSE = 40, 41

# Shape -> geometry, in mouth widths (W). Conversational amplitudes: "aa" at open 0.75 parts the
# lips by about a quarter of the mouth's width (a shout is 0.4).
JAW_DROP = 0.27          # jaw (and chin) drop at open = 1
JAW_FROM = 0.1           # the jaw starts to drop at this open; below it the teeth stay together
LOWER_LIP_DROP = 0.045   # the lower lip's own drop on top of the jaw's, reached at open = LIPS_PART_AT
UPPER_LIP_LIFT = 0.03    # the upper lip's lift, reached at open = LIPS_PART_AT
LIPS_PART_AT = 0.3
SPREAD_LIFT = 0.02       # extra lift of the upper lip and drop of the lower at wide = 1
ROUND_LIFT = 0.02        # rounded lips flare: upper lip up
ROUND_CLOSE = 0.0        # ... and the lower lip comes up a little
ROUND_ARCH = 0.37        # rounded and open ("o"): of the jaw's drop, the upper lip lifts this much more at the
ROUND_ARCH_LOWER = 0.13  # centre, and the lower lip drops this much less (an oval, not a D under a level lip)
ROUND_NARROW = 0.7       # the opening's reach towards the corners, less by this at round = 1
TUCK_LIFT = 0.065        # f, v: upper lip up (the upper incisors show, resting on the lower lip)
TUCK_RISE = 0.035        # f, v: lower lip up (under the upper teeth)
TUCK_THIN = 0.3          # f, v: the lower lip thinner by this share of its thickness (its top rolled in under the teeth)
CORNER_WIDE = 0.12       # each corner outwards at wide = 1
CORNER_ROUND = 0.22      # each corner inwards at round = 1
CORNER_PRESS = 0.02
RELAX_DOWN = 0.6         # of the smile's corner elevation, taken back at relax = 1
RELAX_IN = 0.1           # corners inwards per unit of smile elevation at relax = 1
ROUND_FULL = 0.32        # lips thicker (outer edges out, pushed forward) at round = 1, of their thickness
PRESS_THIN = 0.35        # lips thinner at press = 1, of their thickness
NECK_FALLOFF = 0.40      # below the chin the drop fades over this distance
TOOTH_LEN = 0.05         # visible upper incisor below the resting lip line (at the centre)
ROUND_HIDE = 0.055       # ... less at round = 1 (the lips come forward over the teeth)
OVERBITE = 0.015         # the lower incisors' edge above the upper ones' with the teeth together (more shows
                         # them as a second pale band along the lower lip at every opening)
MM = 50.0                # a mouth width in mm, for tooth sizes
ARCH_R = 20.0            # dental arch radius, mm (frontal projection of the teeth widths)


# The drawn layer's grain: keys for a hash of the crop pixel (row key x column key mod a prime, every product
# under 2^24, exact in float32), 1024 distinct non-zero residues (no row or column of zeros, none alike), the
# same on every build (the legacy generator's stream is fixed).
GRAIN_PRIME = 4093
GRAIN_KEYS = (np.random.RandomState(20261128).permutation(GRAIN_PRIME - 1)[:1024] + 1).reshape(2, 512).astype(np.float32)


class Lips:
    """The key points as the graphs use them: [N,1,1,1] scalars of the mouth's frame."""

    POINTS = [20, 30, CHIN, NOSE, 5, 15, 35]

    def __init__(self, g: Graph, lips):
        self.g = g
        self.lx = lips.gather(0, axis=2)  # [N,K]
        self.ly = lips.gather(1, axis=2)
        # the points used as scalars: one gather, one split (not a gather and a reshape each)
        picked = lips.take(self.POINTS, axis=1).reshape([0, -1, 1, 1])  # [N, 2M, 1, 1]: x0, y0, x1, y1...
        parts = g.op('Split', picked, axis=1, n_out=2 * len(self.POINTS))
        self._pt = {p: (parts[2 * i], parts[2 * i + 1]) for i, p in enumerate(self.POINTS)}
        xr, self.yr = self.pt(20)
        xl, self.yl = self.pt(30)
        self.xa = xr.min(xl)
        self.xb = xr.max(xl)
        self.xc = (self.xa + self.xb) * 0.5
        self.hw = ((self.xb - self.xa) * 0.5).max(1e-3)  # half mouth width
        self.W = self.hw * 2.0
        _, self.y_chin = self.pt(CHIN)
        _, self.y_nose = self.pt(NOSE)
        _, self.y_iu = self.pt(5)
        _, self.y_il = self.pt(15)
        _, self.y_ol = self.pt(35)
        self.y_mouth = (self.y_iu + self.y_il) * 0.5

    def pt(self, i):  # -> [N,1,1,1]
        if i in self._pt:
            return self._pt[i]
        return self.lx.gather(i, axis=1).reshape([-1, 1, 1, 1]), self.ly.gather(i, axis=1).reshape([-1, 1, 1, 1])


def i64(g: Graph, v):
    return g.const(np.asarray(v, np.int64))


def sl(g: Graph, x, starts, ends, axes):
    """Slice x along axes by starts/ends: Python ints, or int64 V's of shape [len(axes)] (one node then)."""
    def bounds(vs):
        if all(isinstance(v, int) for v in vs):
            return i64(g, list(vs))
        return vs[0] if len(vs) == 1 else concat([v.reshape([1]) for v in vs], 0)
    return g.op('Slice', x, bounds(starts), bounds(ends), i64(g, axes))


LUMA = np.asarray([0.299, 0.587, 0.114], np.float32).reshape(1, 3, 1, 1)


def luma(g: Graph, rgb):
    """A colour's luminance, [N,1,...] of [N,3,...]."""
    return (rgb * g.const(LUMA)).sum([1])

# The palette: what the synthesis graph needs of the portrait's pixels, [N, PALETTE] in this order.
PALETTE_FIELDS = [
    ('lip_rgb', 3),      # the lips' colour
    ('lip_up_rgb', 3),   # the upper lip's colour near its inner edge
    ('lip_lo_rgb', 3),   # the lower lip's colour near its inner edge
    ('teeth_rgb', 3),    # the teeth: the portrait's own, or the skin's cast at a small chroma, lit like the skin
    ('cav_rgb', 3),      # the cavity at its reference lightness, in the lips' hue
    ('tongue_rgb', 3),   # the tongue
    ('light_lr', 1),     # the light's side: (right - left) / (right + left) of the skin beside the corners
    ('own_teeth', 1),    # 0..1: the portrait shows its own teeth
    ('occ_at', 1),       # the occlusal line, as a fraction of the own opening from the upper lip's real edge
    ('crease_at', 1),    # the crease's offset from the landmarks' lip line, in mouth widths
    ('lip_edge_at', 1),  # the upper lip's real edge above the landmarks' (own teeth), in mouth widths (<= 0)
    ('blur', 1),         # the photograph's blur (a Gaussian's sigma), in mouth widths
    ('crease_lo', 1),    # the crease's lower flank: from its darkest row down to the lower lip's light, in mouth widths
    ('occ_gap', 1),      # own teeth: the dark under the occlusal line, down to what lies below it (lower teeth, lip), in mouth widths
    ('grain', 1),        # the photograph's own fine grain: its luma's standard deviation over the root of the light, where the skin is smoothest
    ('lip_edge_lo', 1),  # own teeth: the upper lip's real edge below the one taken (the landmarks can sit inside the lip), in mouth widths (>= 0)
]
PALETTE = sum(n for _, n in PALETTE_FIELDS)


def build_palette() -> onnx.ModelProto:
    """crop uint8 [N,S,S,4] + lips [N,42,2] -> palette float32 [N,PALETTE]."""
    g = Graph('mouth_palette', opset=17)
    rgba = g.input('crop', [None, None, None, 4], dtype=TensorProto.UINT8)
    lips = g.input('lips', [None, K, 2])
    s_int = g.op('Shape', rgba).gather(2, axis=0)
    crop = g.op('Slice', g.op('Transpose', rgba, perm=[0, 3, 1, 2]), i64(g, [0]), i64(g, [3]), i64(g, [1]))
    crop = crop.cast(TensorProto.FLOAT) * (1.0 / 255.0)  # NCHW RGB in [0,1], for GridSample
    px = 1.0 / s_int.cast(TensorProto.FLOAT)
    L = Lips(g, lips)
    lx, ly, xa, xb, xc, W = L.lx, L.ly, L.xa, L.xb, L.xc, L.W
    y_chin, y_iu, y_il, y_ol, y_mouth = L.y_chin, L.y_iu, L.y_il, L.y_ol, L.y_mouth
    # --- colours sampled from the crop itself: one GridSample for all of them ---
    own_gap = (y_il - y_iu).relu()  # the portrait's own opening at the centre
    samples = []  # (x, y) pairs of [N,1,1,1] or [N,M,1,1]

    def add(xs, ys):
        samples.append((xs, ys))
        return len(samples) - 1

    lip_idx = [3, 4, 5, 6, 7, 13, 14, 15, 16, 17]
    mx = (lx.take(lip_idx, axis=1) + lx.take([20 + i for i in lip_idx], axis=1)) * 0.5  # [N,10]
    my = (ly.take(lip_idx, axis=1) + ly.take([20 + i for i in lip_idx], axis=1)) * 0.5
    s_lip = add(mx, my)
    # each lip's own colour near its inner edge (a third of the way out), where its wet inner face begins
    def towards_outer(idx, f):
        return (lx.take(idx, axis=1) * (1.0 - f) + lx.take([20 + i for i in idx], axis=1) * f,
                ly.take(idx, axis=1) * (1.0 - f) + ly.take([20 + i for i in idx], axis=1) * f)
    s_lip_up = add(*towards_outer([4, 5, 6], 0.35))
    s_lip_lo = add(*towards_outer([14, 15, 16], 0.35))
    # skin: below the lower lip, and beside each corner (the light's side)
    y_sk = y_ol + (y_chin - y_ol) * 0.45
    s_skin = add(concat([xc, xc - W * 0.15, xc + W * 0.15], axis=1), concat([y_sk, y_sk, y_sk], axis=1))
    s_side = add(concat([xa - W * 0.17, xb + W * 0.17], axis=1), concat([y_mouth + W * 0.1, y_mouth + W * 0.1], axis=1))
    # the mouth's own darks: along the line between the lips (the crease of a closed mouth, the
    # corners of an open one)
    gap_pairs = [(1, 19), (2, 18), (3, 17), (4, 16), (5, 15), (6, 14), (7, 13), (8, 12), (9, 11)]
    gx = (lx.take([a for a, _ in gap_pairs], axis=1) + lx.take([b for _, b in gap_pairs], axis=1)) * 0.5
    gy = (ly.take([a for a, _ in gap_pairs], axis=1) + ly.take([b for _, b in gap_pairs], axis=1)) * 0.5
    s_dark = add(gx, gy)
    # the portrait's own opening down the middle (3 columns x 12 rows): its teeth and occlusal line
    rows = 12
    fr = np.linspace(0.05, 1.15, rows, dtype=np.float32)  # a little into the lower lip: the teeth's end shows
    col_x = concat([xc - W * 0.06, xc, xc + W * 0.06], axis=1)  # [N,3,1,1]
    ox = concat([col_x.reshape([0, 3, 1, 1])] * rows, axis=2).reshape([0, 3 * rows, 1, 1])
    oy = (y_iu + own_gap * g.const(fr.reshape(1, 1, rows, 1))).reshape([0, 1, rows, 1])
    oy = concat([oy] * 3, axis=1).reshape([0, 3 * rows, 1, 1])
    s_own = add(ox, oy)
    # the closed mouth's crease, which the landmarks place only to a pixel or two: the darkest row of
    # the middle columns within 0.07 W of the landmarks' lip line
    fc = np.linspace(-0.07, 0.07, rows, dtype=np.float32)
    cy_ = (y_mouth + W * g.const(fc.reshape(1, 1, rows, 1))).reshape([0, 1, rows, 1])
    cy_ = concat([cy_] * 3, axis=1).reshape([0, 3 * rows, 1, 1])
    s_crease = add(ox, cy_)
    # a portrait showing its teeth: where the upper lip really ends (the landmarks sit low on a broad
    # smile), the largest rise of luminance going down (lip to teeth) above the landmarks' inner upper lip
    fe = np.linspace(-0.2, -0.01, rows, dtype=np.float32)
    ey_ = (y_iu + W * g.const(fe.reshape(1, 1, rows, 1))).reshape([0, 1, rows, 1])
    ey_ = concat([ey_] * 3, axis=1).reshape([0, 3 * rows, 1, 1])
    s_edge = add(ox, ey_)
    # ... and below it, from just above the landmarks' line into the opening (they can sit inside the upper lip)
    fb = np.linspace(-0.02, 0.14, rows, dtype=np.float32)
    by_ = (y_iu + W * g.const(fb.reshape(1, 1, rows, 1))).reshape([0, 1, rows, 1])
    by_ = concat([by_] * 3, axis=1).reshape([0, 3 * rows, 1, 1])
    s_edge_lo = add(ox, by_)
    # the crease's lower flank: down the middle columns from just above the lip line into the lower lip
    fl = np.linspace(-0.01, 0.13, rows, dtype=np.float32)
    fy_ = (y_mouth + W * g.const(fl.reshape(1, 1, rows, 1))).reshape([0, 1, rows, 1])
    fy_ = concat([fy_] * 3, axis=1).reshape([0, 3 * rows, 1, 1])
    s_flank = add(ox, fy_)
    # the photograph's grain: 8x8 crop pixels (their centres) at each of the skin samples (below the
    # lower lip and beside the corners)
    gp = 8
    k_px = g.const((np.arange(gp, dtype=np.float32) - (gp / 2 - 0.5)))
    pcx = concat([xc, xc - W * 0.15, xc + W * 0.15, xa - W * 0.17, xb + W * 0.17], axis=1)  # [N,5,1,1]
    pcy = concat([y_sk, y_sk, y_sk, y_mouth + W * 0.1, y_mouth + W * 0.1], axis=1)
    gx_ = (g.op('Floor', pcx / px) + k_px.reshape([1, 1, 1, gp])) * px  # [N,5,1,8]
    gy_ = (g.op('Floor', pcy / px) + k_px.reshape([1, 1, gp, 1])) * px  # [N,5,8,1]
    s_grain = add(gx_ + gy_ * 0.0, gy_ + gx_ * 0.0)

    def flat(v):
        return v.reshape([0, -1])

    def down_middle(k):  # a sample set of 3 columns x `rows` rows: the luma profile down the middle, [N,1,1,rows]
        return lum(part(k)).reshape([0, 3, rows]).mean([1]).reshape([0, 1, 1, rows])

    def step_down(profile, n):  # each row's luma less the one above it, [N,1,1,n-1]
        return sl(g, profile, [1], [n], [3]) - sl(g, profile, [0], [n - 1], [3])

    def steepest(step, at):  # where `step` is largest (a soft arg-max over the positions `at`)
        w = ((step - step.rmax()) * 120.0).exp()
        return (w * at).sum([3], keepdims=1) / w.sum([3], keepdims=1)

    def half_back(profile, at, rows, lo, hi):
        """The first position `at` among `rows` where `profile` is back half way from lo to hi (2 if none is)."""
        return where(g.op('And', rows, profile > lo + (hi - lo) * 0.5), at, 2.0).rmin()

    grid = concat([concat([flat(sx), flat(sy)], axis=1).reshape([0, 2, -1]) for sx, sy in samples], axis=2)
    grid = g.op('Transpose', grid, perm=[0, 2, 1]).reshape([0, 1, -1, 2]) * 2.0 - 1.0  # [N,1,P,2]
    sampled = g.op('GridSample', crop, grid, mode='bilinear', padding_mode='border', align_corners=0)  # [N,3,1,P]
    counts = [10, 3, 3, 3, 2, len(gap_pairs), 3 * rows, 3 * rows, 3 * rows, 3 * rows, 3 * rows, 5 * gp * gp]
    offs = np.cumsum([0] + counts)

    def part(k):
        return sl(g, sampled, [int(offs[k])], [int(offs[k + 1])], [3])  # [N,3,1,m]

    lip_rgb = part(s_lip).mean([2, 3])  # [N,3,1,1]
    lip_up_rgb = part(s_lip_up).mean([2, 3])
    lip_lo_rgb = part(s_lip_lo).mean([2, 3])
    skin_rgb = part(s_skin).mean([2, 3])
    side = part(s_side)
    dark = part(s_dark)
    own_px = part(s_own)  # [N,3,1,36]: 12 rows for each of 3 columns

    def lum(v):
        return luma(g, v)

    skin_l = lum(skin_rgb).max(0.04)
    lip_l = lum(lip_rgb).max(0.03)
    side_l = lum(side)  # [N,1,1,2]
    light_lr = ((side_l.gather(1, axis=3) - side_l.gather(0, axis=3)) /
                (side_l.gather(1, axis=3) + side_l.gather(0, axis=3) + 1e-3)).reshape([-1, 1, 1, 1]).clip(-0.5, 0.5)
    rise = step_down(down_middle(s_edge), rows)
    fe_mid = (fe[:-1] + fe[1:]) * 0.5
    lip_edge_at = steepest(rise, g.const(fe_mid.reshape(1, 1, 1, rows - 1)))  # W units
    # only a clear step (lip to teeth) counts
    lip_edge_at = lip_edge_at * ((rise.rmax() - 0.06) / 0.04).clip(0.0, 1.0)
    # ... and where it really ends below them, when they sit inside it: the largest rise going down into the
    # upper half of the portrait's own opening (below it lie the teeth's own edges)
    fb_mid = g.const(((fb[:-1] + fb[1:]) * 0.5).reshape(1, 1, 1, rows - 1))
    rise_lo = where(fb_mid * W < own_gap * 0.5, step_down(down_middle(s_edge_lo), rows), -1.0)
    lip_edge_lo = steepest(rise_lo, fb_mid).relu()
    # only a clear step, clearer than any above (counted from where the lip's edge is taken to be)
    lip_edge_lo = (lip_edge_lo - lip_edge_at.min(0.0)) * ((rise_lo.rmax() - 0.06) / 0.04).clip(0.0, 1.0) \
        * ((rise_lo.rmax() - rise.rmax()) / 0.02).clip(0.0, 1.0)
    crease_l = down_middle(s_crease)
    cw_ = ((crease_l - crease_l.rmin()) * -60.0).exp()
    crease_at = (cw_ * g.const(fc.reshape(1, 1, 1, rows))).sum([3], keepdims=1) / cw_.sum([3], keepdims=1)  # W units
    c_lo = crease_l.rmin()
    c_hi = crease_l.rmax()
    # the photograph's own blur, from the steepest step of the crease profile against its depth (a
    # step blurred by a Gaussian of sigma s rises at most depth / (2.5 s))
    dstep = step_down(crease_l, rows)
    steep = dstep.abs().rmax() / (W * float(0.14 / (rows - 1)) / px)  # per crop pixel
    sigma_px = (c_hi - c_lo) / (steep * 2.5 + 1e-4)
    # where the lower lip's light begins below the crease: the first row under the darkest that is back
    # half way from the crease's dark to the lower lip's brightest (a soft photograph's crease is wide,
    # and a lip sampled from inside it shows a dark rim along the opening)
    flank_l = down_middle(s_flank)
    fl_at = g.const(fl.reshape(1, 1, 1, rows))
    under = fl_at > crease_at
    lo_hi = (flank_l * under.cast(TensorProto.FLOAT)).rmax()
    crease_lo = (half_back(flank_l, fl_at, under, c_lo, lo_hi) - crease_at).clip(0.0, 0.14)
    # darkest of the between-lips samples (soft minimum)
    dark_l = lum(dark)  # [N,1,1,9]
    wts = ((dark_l - dark_l.rmin()) * -40.0).exp()
    dark_rgb = (dark * wts).sum([3], keepdims=1) / wts.sum([3], keepdims=1)  # [N,3,1,1]
    dark_ref = lum(dark_rgb)

    # The portrait's own teeth: the opening at the centre, if over 3 px and bright.
    own_l = lum(own_px).reshape([0, 3, rows]).mean([1])  # [N,rows] luma profile down the middle
    own_l = own_l.reshape([0, 1, 1, rows])
    own_bright = own_l.rmax()
    own_teeth = ((own_gap / px - 3.0) / 3.0).clip(0.0, 1.0) * ((own_bright - 0.45) / 0.15).clip(0.0, 1.0)
    # The occlusal line, where the upper teeth end: the largest fall of luminance going down the
    # portrait's own opening (teeth to the dark between the jaws, or to the lower lip), between 25% and
    # 100% of it from the upper lip's real edge: a second look, 16 rows of 5 columns (a single column
    # can run down the gap between two incisors).
    y_top = y_iu + W * lip_edge_at.min(0.0)
    occ_rows, occ_cols, occ_above = 16, 5, 3
    fo = np.linspace(0.2, 1.05, occ_rows, dtype=np.float32)
    # (and three rows above them, for a portrait open mid-speech, whose upper teeth end high in its opening)
    fo_all = np.concatenate([0.2 - 0.05 * np.arange(occ_above, 0, -1, dtype=np.float32), fo])
    n_all = occ_rows + occ_above
    cols5 = concat([xc + W * d for d in (-0.12, -0.06, 0.0, 0.06, 0.12)], axis=1)  # [N,5,1,1]
    oy2 = (y_top + (y_il - y_top).relu() * g.const(fo_all.reshape(1, 1, n_all, 1))).reshape([0, 1, n_all, 1])
    oy2 = concat([oy2] * occ_cols, axis=1).reshape([0, occ_cols * n_all, 1, 1])
    ox2 = concat([cols5.reshape([0, occ_cols, 1, 1])] * n_all, axis=2).reshape([0, occ_cols * n_all, 1, 1])
    grid2 = concat([flat(ox2), flat(oy2)], axis=1).reshape([0, 2, -1])
    grid2 = g.op('Transpose', grid2, perm=[0, 2, 1]).reshape([0, 1, -1, 2]) * 2.0 - 1.0
    occ_l = lum(g.op('GridSample', crop, grid2, mode='bilinear', padding_mode='border', align_corners=0))
    occ_all = occ_l.reshape([0, occ_cols, n_all]).mean([1]).reshape([0, 1, 1, n_all])
    fall_all = sl(g, occ_all, [0], [n_all - 1], [3]) - sl(g, occ_all, [1], [n_all], [3])
    occ_l = sl(g, occ_all, [occ_above], [n_all], [3])
    fall = sl(g, fall_all, [occ_above], [n_all - 1], [3])
    fo_mid = (fo[:-1] + fo[1:]) * 0.5
    occ_at = steepest(fall, g.const(fo_mid.reshape(1, 1, 1, occ_rows - 1)))
    # A portrait that shows its teeth: the first large fall from the top instead (the upper teeth's edge;
    # in a mouth open mid-speech the largest can be the lower teeth's, onto the lower lip), a soft "first"
    # so that a clip's frames do not jump between two falls of about the same size
    rel = fall_all / (fall_all.rmax() + 1e-3)
    low = rel.rmin() * 0.0 - 1.0  # (beyond the ends)
    before = concat([low, sl(g, rel, [0], [n_all - 2], [3])], axis=3)
    after = concat([sl(g, rel, [1], [n_all - 1], [3]), low], axis=3)
    # a large fall at its steepest (a soft photograph's edge falls over two or three rows)
    big = ((rel - 0.6) * 20.0).sigmoid() * ((rel - before + 0.05) * 40.0).sigmoid() * ((rel - after + 0.05) * 40.0).sigmoid()
    none_above = g.op('CumSum', (1.0 - big + 1e-6).log(), i64(g, 3), exclusive=1).exp()
    fw = big * none_above
    fo_mid_all = (fo_all[:-1] + fo_all[1:]) * 0.5
    first = (fw * g.const(fo_mid_all.reshape(1, 1, 1, n_all - 1))).sum([3], keepdims=1) / (fw.sum([3], keepdims=1) + 1e-6)
    # (only when it lies well above the largest: a smile's upper teeth are its largest fall, and its line stays)
    occ_at = lerp(occ_at, first, own_teeth * smoothstep(0.15, 0.3, occ_at - first))
    # under the occlusal line, the dark between the teeth (or of the upper teeth's shadow on the lower lip):
    # how far down it lasts, to the first row back half way from its darkest to the lightest below it
    fo_at = g.const(fo.reshape(1, 1, 1, occ_rows))
    under_occ = fo_at > occ_at
    gap_dark = where(under_occ, occ_l, 2.0)
    gap_lo = gap_dark.rmin()
    at_lo = where(g.op('And', under_occ, gap_dark < gap_lo + 1e-4), fo_at, 2.0)
    past_lo = fo_at > at_lo.rmin()
    past_l = occ_l * past_lo.cast(TensorProto.FLOAT)
    gap_hi = past_l.rmax()
    gap_end = half_back(occ_l, fo_at, past_lo, gap_lo, gap_hi)
    occ_gap = where(gap_end < 1.5, (gap_end - occ_at).relu() * (y_il - y_top).relu() / W, 0.0)
    bright_w = ((lum(own_px) - own_bright * 0.85) * 20.0).sigmoid()  # the brightest samples: teeth
    own_rgb = (own_px * bright_w).sum([3], keepdims=1) / (bright_w.sum([3], keepdims=1) + 1e-4)

    # teeth: the portrait's own, otherwise the skin's hue, far less saturated (its cast at a fixed small
    # strength), a little lighter than the skin
    t_lum = (skin_l * 1.08 + 0.07).clip(0.42, 0.84)
    # teeth are far less saturated than skin: the skin's cast at a fixed, small strength
    cast = skin_rgb / skin_l - 1.0
    cast_k = (((cast * cast).sum([1]) + 1e-6).sqrt().__rtruediv__(0.26)).clip(0.0, 0.6)
    ivory = cast * cast_k + 1.0
    teeth_rgb = lerp(ivory * t_lum, own_rgb, own_teeth)
    cav_l = (dark_ref * 0.9).min(lip_l * 0.42).clip(0.11, 0.2)  # no darker than L* 5 after shading
    cav_rgb = lip_rgb * (cav_l / lip_l) * 0.6 + dark_rgb * (cav_l / dark_ref.max(0.02)) * 0.4
    # tongue: about the lips' lightness with a little of the skin's, and redder than the lips (their chroma
    # 1.35 times): the lips' own colour, desaturated, read as a grey-blue band in a pale-lipped face
    lip_y = lum(lip_rgb)
    tongue_y = lum(lip_rgb * 0.85 + skin_rgb * 0.15)
    tongue_rgb = (tongue_y + (lip_rgb - lip_y) * 1.35).clip(0.0, 1.0)
    blur = sigma_px * px / W
    # the grain: each patch's luma against its 3x3 mean (white noise of deviation s leaves 0.943 s), over the
    # root of its light (a photograph's grain grows with it), in the least textured patch (the others hold
    # pores, wrinkles, a beard, an edge); seven tenths of it (even the least textured patch holds some of the
    # skin's own texture: so much matches the photograph's grain on the fixtures, by its median deviation)
    patch = lum(part(s_grain)).reshape([-1, 1, gp, gp])  # [N*5,1,8,8]
    resid = sl(g, patch, [1, 1], [gp - 1, gp - 1], [2, 3]) - g.op('AveragePool', patch, kernel_shape=[3, 3])
    dev = (resid.sq().mean([2, 3]) - resid.mean([2, 3]).sq()).relu().sqrt() / patch.mean([2, 3]).max(0.04).sqrt()
    grain = (dev.reshape([-1, 5]).rmin(1) * (0.7 / 0.943)).clip(0.0, 0.03)
    fields = dict(lip_rgb=lip_rgb, lip_up_rgb=lip_up_rgb, lip_lo_rgb=lip_lo_rgb, teeth_rgb=teeth_rgb, cav_rgb=cav_rgb,
                  tongue_rgb=tongue_rgb, light_lr=light_lr, own_teeth=own_teeth, occ_at=occ_at, crease_at=crease_at,
                  lip_edge_at=lip_edge_at, blur=blur, crease_lo=crease_lo, occ_gap=occ_gap, grain=grain, lip_edge_lo=lip_edge_lo)
    palette = concat([fields[name].reshape([0, n]) for name, n in PALETTE_FIELDS], axis=1)
    g.output(palette, 'palette', ['N', PALETTE])
    return g.model(doc='The mouth synthesis palette for avatar-platform (measured once per frame); see build_synth.py')


def build_synth() -> onnx.ModelProto:
    """lips [N,42,2] + shape [N,6] + palette [N,PALETTE] + size int64 [1] (S) -> warp, inner, inner_at."""
    g = Graph('mouth_synth', opset=17)
    lips = g.input('lips', [None, K, 2])
    shape = g.input('shape', [None, SHAPE_PARAMS])
    palette = g.input('palette', [None, PALETTE])
    size = g.input('size', [1], dtype=TensorProto.INT64)

    # --- pixel grid (crop-normalised pixel centres) ---
    s_int = size.reshape([])
    s_f = s_int.cast(TensorProto.FLOAT)
    px = 1.0 / s_f  # one pixel, normalised
    # Only the middle of the crop can change (a 10% border is kept as it is): every per-pixel
    # tensor below covers the window [b0, b1) of rows and columns.
    b0 = g.op('Div', s_int, i64(g, 10))
    b1 = s_int - b0
    win = b1 - b0
    ramp = (g.op('Range', b0, b1, i64(g, 1)).cast(TensorProto.FLOAT) + 0.5) / s_f
    X = ramp.reshape([1, 1, 1, -1])  # [1,1,1,w] columns
    Y = ramp.reshape([1, 1, -1, 1])  # [1,1,w,1] rows

    L = Lips(g, lips)
    lx, ly, xa, xb, xc, hw, W = L.lx, L.ly, L.xa, L.xb, L.xc, L.hw, L.W
    y_chin, y_nose, y_iu, y_il, y_mouth = L.y_chin, L.y_nose, L.y_iu, L.y_il, L.y_mouth
    # a smile lifts the corners above the middle of the lip line
    smile = ((y_mouth - (L.yr + L.yl) * 0.5) / W - 0.01).clip(0.0, 0.2)

    parts = g.op('Split', palette.reshape([0, -1, 1, 1]), i64(g, [n for _, n in PALETTE_FIELDS]), axis=1, n_out=len(PALETTE_FIELDS))
    fields = {name: parts[i] for i, (name, _) in enumerate(PALETTE_FIELDS)}  # [N,n,1,1] each
    lip_rgb, lip_up_rgb, lip_lo_rgb = fields['lip_rgb'], fields['lip_up_rgb'], fields['lip_lo_rgb']
    teeth_rgb, cav_rgb, tongue_rgb = fields['teeth_rgb'], fields['cav_rgb'], fields['tongue_rgb']
    light_lr, own_teeth, occ_at = fields['light_lr'], fields['own_teeth'], fields['occ_at']
    crease_at, lip_edge_at, blur = fields['crease_at'], fields['lip_edge_at'], fields['blur']
    crease_lo, occ_gap, grain_dev = fields['crease_lo'], fields['occ_gap'], fields['grain']
    sigma_px = blur * W / px
    y_top = y_iu + W * lip_edge_at.min(0.0)
    y_occ_c = y_top + (y_il - y_top).relu() * occ_at  # the occlusal line at the centre, in crop coordinates

    # open, wide, round, press, tuck, relax: [N,1,1,1] each, clipped to their ranges (one node for all six)
    shape_lo = g.const(np.asarray([0.0, -1.0, 0.0, 0.0, 0.0, 0.0], np.float32).reshape(1, SHAPE_PARAMS, 1, 1))
    shape_hi = g.const(np.asarray([1.25, 1.0, 1.0, 1.0, 1.0, 1.0], np.float32).reshape(1, SHAPE_PARAMS, 1, 1))
    o, wd, rd, pr, tk, rx = g.op('Split', shape.reshape([0, -1, 1, 1]).max(shape_lo).min(shape_hi), axis=1, n_out=SHAPE_PARAMS)
    wdp = wd.relu()

    # --- amounts (W units unless noted) ---
    part_o = (o / LIPS_PART_AT).clip(0.0, 1.0)
    jaw = (o - JAW_FROM).relu() * (JAW_DROP / (1.0 - JAW_FROM))
    # (an "o" with the upper lip only at its small rounded lift, and the jaw's whole drop below, opened as a
    # wide D: a level top with a bowl under it, read as a hole cut in; the arch grows with the jaw, so the
    # small rounded openings, "oo", sh, keep their size and show no more teeth; a portrait showing its teeth
    # keeps its upper lip, and so its "o" as it was: under its broad row of teeth, narrower and shallower, it
    # read as a dark wedge)
    round_arch = rd * jaw * (1.0 - own_teeth)
    ld = jaw + part_o * (LOWER_LIP_DROP * (1.0 - 0.5 * rd)) + part_o * wdp * SPREAD_LIFT - rd * ROUND_CLOSE * part_o \
        - tk * TUCK_RISE - round_arch * ROUND_ARCH_LOWER
    lu = part_o * UPPER_LIP_LIFT + part_o * wdp * SPREAD_LIFT + rd * ROUND_LIFT * part_o + tk * TUCK_LIFT \
        + round_arch * ROUND_ARCH
    aperture = (ld + lu).relu()
    # how far the opening reaches towards the corners (in half widths): the centre first, and a rounded
    # one less far (an oval); the lips' outer edges ease out over the reach of the rounded one before it
    # (ext_lips: over the narrower reach, the skin under "oo" sheared at the opening's ends)
    reach = (aperture * 1.6 + 0.45).clip(0.0, 0.84)
    ext = (reach * (1.0 - lerp(ROUND_NARROW, 0.5, own_teeth) * rd)).max(0.05)
    ext_lips = (reach * (1.0 - 0.5 * rd)).max(0.05)
    # (a portrait that shows its teeth: the lower part of its opening, coming down with the lip, sags in a curve;
    # blunt, it came down as a box with straight sides under the upper teeth)
    p_exp = 0.8 - 0.3 * rd + 0.7 * own_teeth

    # (a broad smile showing its teeth cannot pull its corners in far over them)
    corner = W * (wd * CORNER_WIDE - (rd * CORNER_ROUND + pr * CORNER_PRESS) * (1.0 - 0.7 * own_teeth) - rx * smile * RELAX_IN)
    corner_dy = W * (rx * smile * RELAX_DOWN + 0.012 * rd - 0.01 * wdp)

    # horizontal field: f(t) = t * g(t)/g(1), g = exp(-(t/1.4)^4); peaks at the corners, fades into the cheeks
    def fx(t):
        return t * ((t / 1.4).sq().sq() * -1.0 + (1.0 / 1.4) ** 4).exp()

    # vertical field of the corners: a bump around each corner
    def fy(t):
        return ((t.abs() - 1.0) * (1.0 / 0.5)).sq().__neg__().exp()

    xs1 = X - corner * fx((X - xc) / hw)
    xs_line = X - corner * fx((xs1 - xc) / hw)  # [N,1,1,w] source column of each output column on the mouth line
    t_c = (xs_line - xc) / hw
    dyc_line = corner_dy * fy(t_c)  # [N,1,1,w] how far the corners moved down here

    # lip curves per column, evaluated at the source columns
    sigma = W / 14.0
    inv2s2 = 1.0 / (sigma.sq() * 2.0)

    # (the four curves at once, [N,4,11,w]: their key points a face's constants, [N,44,1,1], then regrouped)
    lip_lines = [INNER_UPPER, INNER_LOWER, OUTER_UPPER, OUTER_LOWER]
    cx = lx.take(sum(lip_lines, []), axis=1).reshape([0, -1, 1, 1]).reshape([0, len(lip_lines), -1, 1])
    cy = ly.take(sum(lip_lines, []), axis=1).reshape([0, -1, 1, 1]).reshape([0, len(lip_lines), -1, 1])
    w = ((xs_line - cx).sq() * -inv2s2).exp() + 1e-12
    inner_upper, inner_lower, outer_upper, outer_lower = g.op('Split', (w * cy).sum([2]) / w.sum([2]), axis=1, n_out=len(lip_lines))

    # a closed mouth's lip line moves onto its crease (an open one keeps its landmarks)
    crease_shift = W * crease_at * (1.0 - own_teeth)
    upper_shift = W * lip_edge_at.min(0.0) * own_teeth  # only ever up
    yU0 = inner_upper + crease_shift
    yU = yU0 + upper_shift
    yL = (inner_lower + crease_shift).max(yU0)
    yOU = (outer_upper + upper_shift).min(yU - px)
    yOL = outer_lower.max(yL + px)

    prof = (1.0 - (t_c / ext).sq()).relu() ** p_exp  # 1 at the centre, 0 beyond ext (sealed corners)
    # the lips' outer edges and the skin beyond them follow a broader profile that reaches 0 at the
    # corners: the opening's own taper is steep at its ends, and taken by the skin it shears a beard's
    # strands there into thin lines fanning out from the corner (to the power 1.5: flatter at the corners,
    # where the thin lip would otherwise stretch the corner's shadow into a dark wedge)
    broad = prof.max((1.0 - t_c.sq()).relu() ** 1.5)
    jaw_prof = ((t_c / 1.75).sq().sq() * -1.0).exp()  # the jaw: broad and flat
    wld = W * ld
    wlu = W * lu * (1.0 - own_teeth)  # a smile showing its teeth keeps its upper lip (landmarks sit loosely there)
    ldc = wld * prof
    luc = wlu * prof
    jc = W * jaw * jaw_prof
    open_px = (ldc + luc) / px
    s_open = (open_px * 0.5 - 0.25).clip(0.0, 1.0)  # the lips are apart here (0 under half a pixel)
    own = own_teeth  # [N,1,1,1]
    cm_blur = (sigma_px * px * 1.2).max(W * 0.015).min(W * 0.035)  # half the crease, and its blur
    cm_w = cm_blur * (1.0 - own)
    cm = cm_w * s_open  # skipped at the lips' inner edges where they are apart
    # ... and at their outer edges (and so by the skin above and below) with a profile that eases out
    # over the opening's outer half: taken column by column like the inner edges, it shifts every column
    # of the opening by up to cm_w and none beside it, a vertical seam from the lips down to the chin
    # (plain at the narrow ends of "oo")
    open_c = ((aperture * W / px) * 0.5 - 0.25).clip(0.0, 1.0)  # the lips are apart at the centre
    s_out = (1.0 - smoothstep(ext_lips * 0.5, ext_lips * 1.2, t_c.abs())) * open_c
    cmo = cm_w * s_out
    # the lower lip's inner edge is sampled past the crease's measured lower flank (a soft photograph's
    # crease is wider than its blur says, and sampled from inside it the lip ends the opening in a dark
    # rim), by at most 0.15 of the lip's thickness (the lip keeps its own rows); the lip moves with it
    # as one piece where the opening is wide, easing out like cmo (cmo_lo), so its grain stays
    cm_lo_w = (W * crease_lo - (y_il - y_iu).relu() * 0.5).min((L.y_ol - y_il) * 0.15).max(cm_blur) * (1.0 - own)
    # a portrait showing its teeth: its own lower part comes down past the dark under its occlusal line
    skip_own = (W * occ_gap).min(W * 0.06) * own
    # ... which in a portrait open mid-speech is its own mouth: its tongue and lower teeth come down with it,
    # so none are drawn above them
    own_inside = own * smoothstep(0.09, 0.14, occ_gap)
    cm_lo = (cm_lo_w.min((ldc + luc) * 0.5).max(cm_w) + skip_own.min(ldc * 0.5)) * s_open
    cmo_lo = cmo + ((cm_lo_w.min(aperture * W * 0.5) - cm_w).relu() + skip_own.min(aperture * W * 0.5)) * broad * open_c
    y_occ = (yU0 + (y_occ_c - y_iu - crease_shift)).min(yL).max(yU)  # the occlusal line follows the lip line's curve
    thick_u = yU - yOU
    thick_l = yOL - yL
    lip_full = ROUND_FULL * rd - PRESS_THIN * pr
    # output knots (in the corner field's source space)
    yOUo = yOU - wlu * broad - thick_u * lip_full * (1.0 - own)  # a broad smile's upper lip stays as it is
    yUo = yU - luc
    yLo = yL + ldc
    # (a rise, f's, keeps the lip's own profile; and f's lip, its top rolled in under the teeth, is thinner: at its
    # full thickness it read as a relaxed lip with teeth laid over it)
    yOLo = yOL + wld * where(ld > 0.0, broad, prof) + thick_l * (lip_full - TUCK_THIN * tk * (1.0 - own))
    # m, b, p on a portrait that shows its teeth (or is caught open mid-speech): the lips close over what it
    # shows between them, each as one piece, the upper coming down a little and the lower up to meet it; the
    # teeth stay where they are, covered (pressed lips, from half the press on)
    def engaged(v):  # 0 up to 0.1, 1 from 0.5 on
        return (v * 2.5 - 0.25).clip(0.0, 1.0)

    shut_k = press_k = engaged(pr) * own
    corners = ((1.1 - t_c.abs()) * (1.0 / 0.15)).clip(0.0, 1.0)  # (not past the corners: the cheeks)
    # small rounded sounds ("oo", sh, r) on such a portrait: the lips close over its teeth, as for m, b, p but
    # not pressed and only between its corners, which come in (a broad smile kept its teeth across the whole
    # mouth for them; an open "o" keeps its own opening: closed from the corners in, the lips' edges came down
    # in steps over its teeth)
    round_k = engaged(rd * 1.3) * (own - own_inside) * (1.0 - smoothstep(0.3, 0.45, o))
    shut_k = shut_k.max(round_k)
    corners = corners.min(((1.05 - t_c.abs()) * (1.0 / 0.15)).clip(0.0, 1.0).max(1.0 - round_k))
    # (the upper lip's real edge, where the landmarks sit inside it: pressed, its whole thickness comes down)
    lip_real = W * fields['lip_edge_lo'] * (1.0 - t_c.sq()).relu()
    lip_below = lip_real * press_k
    gap_k = ((yL - yU).relu() * shut_k - lip_below + (ldc + luc) * round_k) * corners
    # f, v on such a portrait: the lower lip comes up to its upper teeth's edge (its own occlusal line)
    close_f = (yL + ldc - y_occ - W * 0.01).relu() * (engaged(tk) * own) * corners
    # (the upper lip comes down further for a rounded sound: a broad smile's lower lip, coming up the whole way,
    # dragged the skin below it up unevenly)
    close_u = gap_k * (0.4 + 0.15 * round_k)
    # (a rounded sound's closure keeps its meeting line: the upper lip comes down less, at the whole thickness it has)
    lip_below_r = (lip_real * round_k).min(close_u)
    close_u = close_u - lip_below_r
    lip_below = lip_below + lip_below_r
    close_l = (gap_k * (0.6 - 0.15 * round_k)).max(close_f)
    # (their edges sampled two pixels inside: the photograph blurs them into the teeth, a pale seam)
    ins = shut_k * px * 2.0
    yOUo = yOUo + close_u
    yUo = yUo + close_u + lip_below
    yLo = yLo - close_l
    yOLo = yOLo - close_l
    # what the portrait shows between its lips (its closure, or its upper teeth) ends here, and the new
    # space below it ends lower by the lower lip's drop (at yLo for a closed portrait)
    y_shut = y_occ + (yL - y_occ) * (1.0 - own)
    y_new_bot = (y_shut + ldc).min(yLo)
    # the portrait's own closure stays (not drawn over) until the lips are a pixel or two apart here
    shut = own.max(((0.7 - open_px) * 2.0).clip(0.0, 1.0))

    # --- per pixel warp ---
    vfall = (((Y - y_mouth) / (W * 0.55)).sq() * -1.0).exp()
    dx_line = X - xs_line  # [N,1,1,w] each column's horizontal motion on the mouth line
    y1 = Y - dyc_line * vfall  # the corners' vertical motion undone

    def step(x, e0, e1):  # ~smoothstep(e0, e1, x), 3 ops a pixel
        mid = (e0 + e1) * 0.5
        k = 5.5 / (e1 - e0)
        return ((x - mid) * k).sigmoid()

    # above the upper lip: its lift fades to nothing at the base of the nose
    # each lip moves as one piece, its inner edge sampled beyond the crease (cm, its outer edge by cmo):
    # the skin above and below takes up the difference
    d_top = yOU - cmo - yOUo
    up_src = y1 + d_top * step(y1, y_nose, yOUo)
    # (the upper lip's measured edge is its steepest rise, not the landmarks': one pixel inside it is lip)
    ulip_src = yOU - cmo + (y1 - yOUo) * ((yU + lip_below - cm - (ins - lip_below.min(px)) - yOU + cmo) / (yUo - yOUo).max(1e-4))
    llip_src = yL + cm_lo + ins + (y1 - yLo) * ((yOL + cmo_lo - yL - cm_lo - ins) / (yOLo - yLo).max(1e-4))
    # below the lower lip: its drop blends into the jaw's towards the chin, then fades over the neck
    d_bot = yOLo - yOL - cmo_lo
    depth = step(y1 - d_bot, yOL, y_chin)
    # (a mouth caught open mid-speech closes with its jaw: the chin comes up with the lower lip, half as far;
    # all the way, the neck below stretched into streaks)
    d_low = d_bot + (jc - close_l * (own_inside * 0.5) - d_bot) * depth
    neck = step(y1 - d_low, y_chin + W * NECK_FALLOFF, y_chin)
    low_src = y1 - d_low * neck
    # inside the opening: the portrait's own upper teeth stay, its lower part moves with the lower lip (from
    # past the dark under its occlusal line, cm_lo);
    # the new space in between samples the lips' inner edges (the drawn layer covers it, and its soft
    # edge shows lip there, not the crease)
    in_src = where(y1 < yU, yU - cm, where(y1 < y_shut, y1, where(y1 < y_new_bot, lerp(yL + cm_lo + (y_occ - yL - cm_lo) * own, y_occ + (y1 - y_shut) * (cm_lo / (y_new_bot - y_shut).max(px)).min(1.0), own_inside), y1 - ldc + close_l + cm_lo * own)))
    y_src = where(y1 < yOUo, up_src, where(y1 < yUo, ulip_src, where(y1 < yLo, in_src, where(y1 < yOLo, llip_src, low_src))))
    # the portrait's own upper teeth do not follow the corners either
    teeth_band = g.op('And', g.op('And', y1 > yU - W * 0.08, y1 < y_occ), own_teeth > 0.5)  # from a little above: the landmarks sit low there
    # (only between the corners: beside them the cheeks follow the corners' field on every row, or a
    # smile's nasolabial folds break into steps where the band begins and ends)
    # (lips closed over them follow the corners as the rest of the lips do)
    x_src = X - where(teeth_band, dx_line * lerp(smoothstep(0.8, 1.0, t_c.abs()), 1.0, shut_k), dx_line) * vfall

    # keep the crop's border untouched
    bx = smoothstep(0.1, 0.17, X.min(1.0 - X))  # 0 outside the window, so padding back is seamless
    by = bx.reshape([1, 1, -1, 1])  # (rows and columns of the window are the same ramp)
    border = bx * by
    off_x, off_y = (x_src - X) * border, (y_src - Y) * border  # [N,1,w,w] each
    # Under 0.05 px of motion counts as none, fading in up to 0.5 px (keeps the changed region small
    # and exactly zero where nothing visibly moves).
    moved = (off_x.abs() + off_y.abs()) / px  # (a ReduceSum over the two channels costs ONNX Runtime 50 µs at batch 1)
    gate = ((moved - 0.05) / 0.45).clip(0.0, 1.0) * s_f  # normalised -> crop pixels
    warp = concat([off_x, off_y], axis=1) * gate  # [N,2,w,w], source offset in crop pixels

    # --- inner mouth layer, on the sub-window that holds every opening of the batch and its lip margins ---
    def reduce_all(op, x):  # over the whole batch: one window for all of it, [1,1,1,1]
        return g.op(op, x, keepdims=1)

    margin = W * 0.06  # the lip margins' shading falls to 0 within it
    # the window's first and last row and column, in crop pixels (a vector: one node a step for all four)
    window = concat([
        reduce_all('ReduceMin', yUo + dyc_line - margin),
        reduce_all('ReduceMin', xa - corner.abs()),
        reduce_all('ReduceMax', yLo.max(yU + W * (TOOTH_LEN + 0.03) * (tk > 0.05).cast(TensorProto.FLOAT)) + dyc_line + margin),
        reduce_all('ReduceMax', xb + corner.abs()),
    ], axis=3).reshape([4]) * s_f + g.const(np.asarray([-2.0, -2.0, 2.0, 2.0], np.float32))
    window = g.op('Max', g.op('Min', g.op('Floor', window).cast(TensorProto.INT64) - b0, win), i64(g, 0))  # in the window
    first, last = g.op('Split', window, axis=0, n_out=2)  # [row, column] each
    last = g.op('Min', g.op('Max', last, first + i64(g, 1)), win)  # at least one row and one column
    first = g.op('Min', first, last - i64(g, 1))
    ra1, ca1 = g.op('Split', first, axis=0, n_out=2)
    rb1, cb1 = g.op('Split', last, axis=0, n_out=2)
    inner_at = first + b0  # in the crop
    (r0, c0), (r1, c1) = (g.op('Split', v, axis=0, n_out=2) for v in (inner_at, last + b0))
    Ys = sl(g, Y, [ra1], [rb1], [2])
    Xs = sl(g, X, [ca1], [cb1], [3])
    columns = (yU, yUo, yLo, y_occ, y_shut, y_new_bot, t_c, ldc, jc, s_open, dyc_line, prof, shut, gap_k, close_f)
    (yU, yUo, yLo, y_occ, y_shut, y_new_bot, t_c, ldc, jc, s_open, dyc_line, prof_s, shut, gap_k, close_f) = g.op(
        'Split', sl(g, concat(list(columns), axis=1), [ca1], [cb1], [3]), axis=1, n_out=len(columns))  # (one slice for all)
    Yl = Ys - dyc_line  # in the lip curves' space

    # the drawn edges are as soft as the photograph's own lip line (its crease), at least a pixel
    soft = (sigma_px * 2.0 * (1.0 - own) + own).clip(1.0, 4.0) * px

    half = soft * 0.5

    def band(top, bot):  # coverage of a pixel (box-filtered at `soft`) by the rows [top, bot] (exactly 0 for an empty band)
        return ((Yl + half).min(bot) - (Yl - half).max(top)).relu() / soft

    # the new space: under the lifted upper lip, and between the jaws (what the portrait shows between
    # its lips stays: its own teeth, and wherever the lips are still together (closed, barely parted, or
    # beyond the opening's sealed ends) its own closure, where the landmarks may leave a gap a beard or
    # moustache hides)
    a_open = band(yUo, y_new_bot) - band(yU, y_shut) * shut

    # tooth geometry on the dental arch (mm from the midline, frontal projection)
    x_mm = (t_c * (MM / 2.0)).clip(-ARCH_R * 0.999, ARCH_R * 0.999)
    s_mm = g.op('Asin', x_mm / ARCH_R).abs() * ARCH_R  # arch length from the midline
    # tooth index: the central incisor 8.5 mm along the arch, then 7 mm a tooth
    u_up = (s_mm / 8.5).min(1.0) + (s_mm - 8.5).relu() / 7.0
    f_up = u_up - g.op('Floor', u_up)
    e_up = f_up.min(1.0 - f_up)  # 0 at a boundary between teeth, 0.5 in the middle of one
    tooth_w_px = where(u_up < 1.0, 8.5, 7.0) * (W / px) / MM * (1.0 - (x_mm / ARCH_R).sq()).max(0.05).sqrt()
    emb_px = e_up * tooth_w_px  # distance to the nearest tooth boundary, in pixels
    # the incisal edge: a smile arc (the centrals longest), rounded tooth corners
    y_te_rest = y_occ + W * TOOTH_LEN * (1.0 - own)
    # rounded lips come forward over the upper teeth: "oo" is a small dark opening, not a pale oval of teeth
    # (and the arch of an "o" shows none more: they go up with it)
    # (and towards its ends, where the lips curve down round the opening, they go behind them: drawn to the ends,
    # a thin band of teeth followed the opening's edge down its sides, "a light band ... like an outline")
    y_te0 = y_te_rest - W * (ROUND_HIDE * rd + round_arch * ROUND_ARCH * prof_s + 0.035 * rd * (1.0 - prof_s)) * (1.0 - own)
    y_te = y_te0 - W * (0.018 * t_c.sq() + 0.01 * (1.0 - smoothstep(0.0, 0.3, e_up)))
    # lower teeth: on the jaw, smaller, in the upper teeth's shadow; shown only where the lip lets them
    y_lt = y_te_rest - W * OVERBITE + jc - W * 0.012 * t_c.sq()
    u_lo = s_mm / 5.5
    f_lo = u_lo - g.op('Floor', u_lo)
    e_lo = f_lo.min(1.0 - f_lo)
    # tongue: a dome behind the lower teeth, lit at its front, darker at the back (its top); under a portrait's
    # own teeth it rises further (their lower teeth, hidden, no longer bound it; low, the opening above it was a
    # black slab), but not into a rounded "o" (one flat fill up to the teeth)
    y_tg = y_lt - W * ((0.06 + 0.05 * own * (1.0 - rd)) * (1.0 - t_c.sq()).relu()) * smoothstep(0.03, 0.12, jc / W)
    # f, v: the upper teeth rest on the lower lip (drawn over its top)
    tuck_k = smoothstep(0.05, 0.4, tk) * (1.0 - own) * prof_s.sqrt()
    y_fe = yLo + W * 0.03 * prof_s  # where the teeth rest on the lower lip

    # The layers' edges across the window, all at once (one channel each, [N,n,h,k]): a row's distance
    # from each edge's column of rows (signed: +1 below it, -1 above it) over that edge's width
    def across(edges):
        at = concat([row for row, _, _ in edges], axis=1)
        sign = g.const(np.asarray([s for _, s, _ in edges], np.float32).reshape(1, -1, 1, 1))
        d = Yl - at
        d = d if all(s == 1 for _, s, _ in edges) else d * sign
        return d / concat([w for _, _, w in edges], axis=1)

    # a pixel's anti-aliased coverage inside each edge (its own softness: the photograph's lip line, or
    # the incisal edge's)
    incisal_soft = g.op('Expand', px * 1.6, g.op('Shape', soft))
    (in_lt, in_own_ut, in_tuck_top, in_tuck_bot, in_fs, in_us, in_lo, in_tg, in_ut) = g.op('Split', (across([
        (y_lt, 1, soft), (yU + px, -1, soft), (yUo, 1, soft), (y_fe, -1, soft), (y_fe, 1, soft), (yUo, -1, soft),
        (yLo, 1, soft), (y_tg, 1, soft.max(W * 0.03 * own)), (y_te, -1, incisal_soft),
    ]) + 0.5).clip(0.0, 1.0), axis=1, n_out=9)
    # smooth steps down from an edge, over a width (each channel's own light: offset + scale * step)
    steps = across([
        (y_lt, 1, W * 0.06), (y_te - W * 0.03, 1, W * 0.03), (y_te - W * 0.02, 1, W * 0.02), (y_tg, 1, W * 0.07),
        (yUo, 1, (W * 0.045).max(px * 3.0)), (y_lt + W * 0.015, 1, W * 0.015),
    ]).clip(0.0, 1.0)
    steps = g.const(np.asarray([0.8, 0.35, 1.0, 0.55, 0.0, 0.0], np.float32).reshape(1, -1, 1, 1)) \
        + g.const(np.asarray([-0.35, 0.65, -0.08, 0.55, 1.0, 1.0], np.float32).reshape(1, -1, 1, 1)) * (steps * steps * (3.0 - 2.0 * steps))
    lit_lt, emb_edge, incisal, lit_tg, lip_shadow, own_lt_below = g.op('Split', steps, axis=1, n_out=6)

    a_ut = in_ut * (1.0 - own) + in_own_ut * own  # a soft incisal edge
    # the upper lip's shadow, a narrow band (at least 3 px: a small face's lip edge covers a pixel or two);
    # with f, v the lifted lip lets the light onto the teeth
    shade_ut = (0.45 + 0.3 * tk + (0.55 - 0.3 * tk) * lip_shadow)
    # along the arch: the upper teeth darker (the buccal corridor), the lower ones shown less and darker
    arch_ut, arch_lt, arch_shade_lt = smoothsteps(s_mm, [(8.0, 22.0), (14.0, 20.0), (6.0, 16.0)], [1.0, 1.0, 1.0], [-0.6, -1.0, -0.4])
    shade_ut = shade_ut * arch_ut
    # (f, v show the teeth above their edge, on the lower lip: there too a little clearer, or the row reads as one
    # pale strip)
    emb = (1.0 - smoothstep(0.3, 1.3, emb_px)) * (emb_edge + (1.0 - emb_edge) * tuck_k * 0.6)
    shade_ut = shade_ut * (1.0 - 0.2 * emb)  # embrasures: faint, clearest at the edge
    # each tooth rounded, turning away from the light towards its sides (flat, the row read as one strip)
    shade_ut = shade_ut * (0.87 + 0.16 * (e_up * 2.0).sqrt()) * (1.0 + light_lr * t_c * 0.4)
    shade_ut = shade_ut * incisal * (1.0 - 0.35 * rd)  # the incisal edge, thinner; rounded lips shade
    # (a portrait that shows its teeth brings its own lower part of the opening down with the lower lip: whole
    # drawn lower teeth above it read as a second, grey row; their edges alone do not)
    # (their base stays behind the lower lip: drawn down to it, they read as a pale strip along its edge)
    a_lt = in_lt * ((yLo - W * 0.01 - Yl) * (1.0 / (W * 0.035))).clip(0.0, 1.0) * arch_lt * (1.0 - own * own_lt_below) * (1.0 - own_inside)
    # lit at their edge, falling into the lower lip's shadow; separations a little clearer than the upper teeth's
    shade_lt = lit_lt * (1.0 - 0.15 * (1.0 - smoothstep(0.03, 0.15, e_lo)))
    shade_lt = shade_lt * arch_shade_lt
    # cavity: the portrait's own darks in the lips' hue, darkest at the back and towards the corners
    near_lip = ((yLo - Yl).relu() / (W * 0.05) * -1.0).exp()
    # darkest just behind the upper teeth (the back of the mouth), lighter towards the lower lip
    # (a small opening lets little light in: its floor and the lower lip's inside stay dark)
    lit = smoothstep(0.05, 0.15, aperture)
    # A small opening shows mostly the lips' inner faces and the dark behind them, in shade, where tissue's
    # colour deepens at the same light (as in the portrait's own crease): mixed plainly with the cavity's dark,
    # they read as a grey-blue blob between red lips (Grace Hopper's "u"). So there the cavity's chroma grows
    # 1.7 times (1.4 times in a larger opening, read grey-mauve beside warm skin at the lips' chroma) and the
    # inner faces' 1.35 times, a third darker (at their own light, and as deep as the
    # cavity, they drew a red line along a narrow slit); the teeth dim a little (more, they read murky on a
    # small face), but for f, v, whose lifted lip lets the light onto them. (A portrait showing its teeth
    # keeps its cavity: deeper, the rig read the astronaut's small opening as less open than her smile.)
    shade_ut = shade_ut * (0.8 + 0.2 * lit.max(tk))
    small = 1.0 - lit

    def wet(rgb, k):  # a colour at the same light and hue, its chroma 1 + k times
        return rgb + (rgb - luma(g, rgb)) * k
    cav_l = luma(g, cav_rgb)  # (the face's: the deeper colour has the same light)
    cav_rgb = wet(cav_rgb, (small * 0.7 + lit * 0.4) * (1.0 - own))
    # towards the corners the cavity darkens, and the tongue goes
    sides_cav, sides_tg = smoothsteps(t_c.abs(), [(0.2, 0.9), (0.45, 0.8)], [1.0, 1.0], [-0.25, -1.0])
    cav_shade = (0.72 + (0.5 * smoothstep(y_te0, lerp(yLo, y_new_bot, own), Yl) + 0.2 * near_lip) * lit) * sides_cav
    # (never below L* 5: a hole; under a portrait's own teeth, whose dark between them may be black, L* 12, and
    # lighter down to its opening's own lower edge, not the lower lip's landmarks far below it)
    cav_shade = cav_shade.max((0.08 + 0.06 * own) / cav_l.max(0.01))
    a_tg = in_tg * sides_tg * (1.0 - own_inside)
    # the tongue lit at its front, falling into the lower lip's shade where it meets it (lit there, it drew a
    # pale line along the opening's lower edge); under a portrait's own teeth in the mouth's shade, deeper in
    # colour (at their light, a pale flat pink; dimmed alone, a muddy brown), its top soft
    tg_shade = lit_tg * (1.0 - 0.45 * near_lip) * (1.0 - 0.4 * own)
    # grain: a fixed pattern attached to the face (crop pixels), as strong as the photograph's own at each
    # layer's light and so weaker in the dark, as a photograph's is (its deviation in proportion to the root of
    # the light): multiplicative, one amplitude for the teeth and one for the rest (cavity, tongue, lips' faces)
    # (a hash of the crop pixel in whole numbers that float32 holds exactly, a random key per row times one
    # per column modulo a prime, so every device draws the same grain to the bit: a hash through cos() is not
    # the same to the last bit on the GPU, and the fraction taken of it jumps)
    row_key = sl(g, g.const(GRAIN_KEYS[0].reshape(1, 1, -1, 1)), [r0], [r1], [2])
    col_key = sl(g, g.const(GRAIN_KEYS[1].reshape(1, 1, 1, -1)), [c0], [c1], [3])
    noise = g.op('Mod', row_key * col_key, g.const(np.float32(GRAIN_PRIME)), fmod=1)  # [1,1,h,k], 0..GRAIN_PRIME-1

    def grained(light):  # the coverage with the grain of a colour of this light (the noise centred: [-0.5, 0.5) of GRAIN_PRIME)
        scale = grain_dev * float(np.sqrt(12.0) / GRAIN_PRIME) / light.max(0.01).sqrt()
        return alpha * (noise * scale + (1.0 - scale * ((GRAIN_PRIME - 1) * 0.5)))

    # f, v: the upper teeth over the top of the lower lip
    a_tuck = a_ut * in_tuck_top * in_tuck_bot * tuck_k
    # their contact shadow on the lip, just below
    a_fs = (1.0 - (Yl - y_fe).relu() / (W * 0.025)).relu().sq() * in_fs * tuck_k * 0.6
    alpha = a_open.max(a_tuck)
    # closed over the portrait's teeth, the lips meet in a crease of the mouth's own dark, opaque for a pixel:
    # the frame's pixels between the warp's last row of the upper lip and first of the lower one would
    # take the teeth between them, a pale seam (only once the lips have met: no line across the teeth);
    # so does the lower lip where it comes up to the teeth for f, v
    def crease(at):  # opaque within half a soft edge of row `at`, none past one and a half
        return ((Yl - at).abs() / soft * -1.0 + 1.5).clip(0.0, 1.0)

    a_cr = crease((yUo + yLo) * 0.5) * (gap_k / (W * 0.02) - (yLo - yUo) / (px * 2.0)).clip(0.0, 1.0)
    a_cr = a_cr * (1.0 - round_k * smoothstep(0.7, 0.9, t_c.abs()))  # (a rounded mouth's corners have come in)
    a_cr = a_cr.max(crease(yLo) * ((close_f / (W * 0.02)).clip(0.0, 1.0) * ((0.9 - t_c.abs()) * 10.0).clip(0.0, 1.0)))  # (short of the corners)
    # the lips' wet inner faces at the opening's edges (the lower one rolls out as the jaw drops):
    # each lip's own colour, darkened (the lower one towards the mouth's warm dark, opaque at its edge),
    # fading into the mouth, so the lips end in neither a hard line nor a pale one
    inner_lo = ((yLo - Yl).relu() / (W * 0.03) * -1.0).exp() * (1.0 - own) * (1.0 - a_ut)
    inner_up = ((Yl - yUo).relu() / (W * 0.012) * -1.0).exp() * 0.6 * (1.0 - own)
    # the inner lip margins, where the lips are apart: a shadow inside the upper lip's edge, a moist
    # highlight along the lower lip's, which turns inward in shade at its edge (each falls to exactly 0
    # within the layer's margin, so a batch's larger window changes nothing)
    d_up = (yUo - Yl).relu()
    a_us = (1.0 - d_up / (W * 0.05)).relu().sq().sq() * 0.3 * s_open * in_us * (1.0 - own)
    d_lo = (Yl - yLo).relu()
    a_lw = (1.0 - ((d_lo - W * 0.03) / (W * 0.025)).sq()).relu().sq() * 0.15 * s_open * in_lo
    a_ld = (1.0 - d_lo / (W * 0.035)).relu()
    a_ld = a_ld * a_ld * a_ld * 0.3 * s_open * in_lo * (1.0 - own)

    # Layers, back to front: the cavity, the tongue, the lower teeth, the upper teeth (shaded teeth turn
    # towards the mouth's own warm dark, never grey), the lips' inner faces; then, outside the opening,
    # the margins. Every step is a blend of the same few colours, so the picture is their sum with
    # per-pixel weights (one channel each): a few three-channel operations instead of many.
    w_cav = cav_shade * (1.0 - a_tg)
    w_tg = tg_shade * a_tg
    keep = 1.0 - a_lt
    w_cav = w_cav * keep + (1.0 - shade_lt) * a_lt
    w_tg = w_tg * keep
    w_teeth = shade_lt * a_lt
    keep = 1.0 - a_ut
    w_cav = w_cav * keep + (1.0 - shade_ut) * a_ut
    w_tg = w_tg * keep
    w_teeth = w_teeth * keep + shade_ut * a_ut
    keep = (1.0 - inner_lo) * (1.0 - inner_up)
    w_lo = inner_lo * 0.62 * (1.0 - inner_up)
    w_lc = inner_lo * 0.38 * (1.0 - inner_up)  # (in the cavity's colour)
    w_up = inner_up * 0.6
    opaque = grained(cav_l)
    opaque_t = grained(luma(g, teeth_rgb))
    m = 1.0 - alpha  # the margins show where the opening does not
    pm = (cav_rgb * ((w_cav * keep + w_lc) * opaque) + wet(tongue_rgb, 0.5 * own) * (w_tg * keep * opaque) + teeth_rgb * (w_teeth * keep * opaque_t)
          + lip_lo_rgb * (a_ld * m * 0.72) + (wet(lip_lo_rgb, small * 0.35) * w_lo + wet(lip_up_rgb, small * 0.35) * w_up) * (opaque * (0.65 + 0.35 * lit))
          + lip_rgb * ((a_us + a_lw) * m * 0.6) + a_lw * m * 0.4 + cav_rgb * (a_fs * m) + (cav_rgb * 0.6 + lip_rgb * 0.4) * (a_cr * m))
    total = alpha + m * (a_us + a_lw + a_ld + a_fs + a_cr)
    # (a portrait caught open mid-speech shows its own inside there, stretched, not a flat drawn fill)
    see = 1.0 - own_inside
    inner_pm = concat([pm.clip(0.0, 1.0) * (255.0 * see), total * see], axis=1)  # [N,4,h,k]

    g.output(warp, 'warp', ['N', 2, 'w', 'w'])
    g.output(inner_pm, 'inner', ['N', 4, 'h', 'k'])
    g.output(inner_at, 'inner_at', [2], dtype=TensorProto.INT64)
    return g.model(doc='Built-in mouth synthesis for avatar-platform; see render/models/build/synth/build_synth.py')


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    # an argument writes the pair elsewhere (an experiment beside the shipped graphs)
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(here, '..', '..', 'synth'))
    os.makedirs(out_dir, exist_ok=True)
    palette, synth = hoist_face_constants(build_palette(), build_synth())
    for name, model in (('mouth_palette.onnx', palette), ('mouth_synth.onnx', synth)):
        path = os.path.join(out_dir, name)
        onnx.save(model, path)
        print(f'wrote {path} ({os.path.getsize(path)} bytes, {len(model.graph.node)} nodes)')


if __name__ == '__main__':
    main()
