"""Build render/models/synth/mouth_synth.onnx: the built-in lip-sync synthesis.

    python3 -m venv /tmp/synthvenv && /tmp/synthvenv/bin/pip install -r render/models/build/synth/requirements.txt
    /tmp/synthvenv/bin/python render/models/build/synth/build_synth.py

No learned weights: the graph is hand-written geometry and shading, so it is
small (tens of KB), deterministic and runs the same on onnxruntime's CPU and
CUDA providers (opset 17, only standard ops; GridSample does the warp).

Contract (mirrored in render/synth/contract.ts; keep them in step):

  crop   uint8   [N,S,S,4]  RGBA (nearest pixel), a square crop rotated so the mouth corners lie on
                            a horizontal line; only its size (S) and the colours of the lips, skin
                            and teeth are read from it, all inside the key points' box widened by a
                            fifth of the mouth's width each side (synthReadRegion in contract.ts)
  lips   float32 [N,42,2]   key points in crop-normalised coords ([0,1] across the crop, x right, y down):
                              0..19  inner lip loop (MediaPipe 78,191,80,81,82,13,312,311,310,415,
                                     308,324,318,402,317,14,87,178,88,95): corner, 9 upper, corner, 9 lower
                              20..39 outer lip loop (61,185,40,39,37,0,267,269,270,409,
                                     291,375,321,405,314,17,84,181,91,146), same order
                              40     chin (152)
                              41     base of the nose (2)
  shape  float32 [N,3]      (open 0..1, wide -1..1, round 0..1); (0,0,0) leaves the crop as it is
  warp     float32 [N,2,w,w]  backward warp over the crop's middle window (w = S - 2*floor(S/10)): where
                              each pixel takes its colour from, (du, dv) in crop pixels; exactly 0 where
                              it moved under 0.05 px. The composite samples the full-resolution frame there.
  inner    float32 [N,4,h,k]  the drawn inner mouth, rgb in frame levels premultiplied by its coverage,
                              and the coverage, over the rows/columns holding every opening of the batch
  inner_at int64   [2]        crop pixel (row, column) of inner's first pixel

Design, all in the mouth's own frame (x along the corners, y down), lengths
in units of the mouth width W (outer corner to outer corner):

  1. Lip curves per column. The upper and lower inner lip lines and the outer
     lines are interpolated across the columns (Gaussian-weighted, Nadaraya-
     Watson) from the 11 points of each.
  2. A backward warp (output pixel -> source pixel), so every output pixel is
     defined; the composite (render/synth/image.ts) resamples the frame itself
     along it (one bilinear step from the full-resolution frame):
       - the corners move out with `wide` and in with `round` (a horizontal
         field that peaks at the corners and fades into the cheeks);
       - the lower lip and the whole jaw drop with `open`: the lower lip by a
         lens-shaped profile that is 0 at the corners, blending with depth into
         a broad, nearly flat profile at the chin (the jaw is rigid), then
         fading over the neck below the chin so the chin covers the neck;
       - the upper lip lifts a little, fading to zero at the base of the nose;
       - the band between the displaced inner lips is filled by stretching the
         original inner-lip band (so at shape 0 the map is the identity).
  3. An inner-mouth layer inside the displaced opening: a dark cavity tinted
     from the lips' own colour (sampled inside the graph, so it suits any skin
     tone), lighter near the wet inner lip edges; the tongue low in the mouth;
     upper teeth fixed to the skull (they do not move with the jaw), with
     shadow under the upper lip, darkening towards the corners (buccal
     corridor), faint separations between teeth and a slightly scalloped
     edge; faint lower teeth on the jaw when the mouth is well open. Teeth
     brightness follows the skin's brightness (the lighting), not pure white.
  4. Soft (about 1 px) edges everywhere and a window that keeps the crop's
     border untouched.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_dsl import Graph, concat, lerp, smoothstep, where  # noqa: E402

K = 42
INNER_UPPER = list(range(0, 11))  # corner, 9 upper, corner
INNER_LOWER = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0]
OUTER_UPPER = [20 + i for i in INNER_UPPER]
OUTER_LOWER = [20 + i for i in INNER_LOWER]
CHIN, NOSE = 40, 41

# Shape -> geometry, in mouth widths (W). See the docstring.
LOWER_DROP = 0.40      # lower lip drop at the centre at open = 1
LOWER_DROP_ROUND = 0.05
UPPER_LIFT = 0.07
UPPER_LIFT_ROUND = 0.05
CORNER_WIDE = 0.10     # each corner outwards at wide = 1
CORNER_ROUND = 0.15    # each corner inwards at round = 1
NECK_FALLOFF = 0.40    # below the chin the drop fades over this distance
TOOTH_LEN = 0.09       # visible upper incisor below the resting upper inner lip line
UPPER_SHARE = 0.65     # of the portrait's own mouth opening, the part that stays up (upper teeth)


def _f(x):
    return x


def build() -> onnx.ModelProto:
    g = Graph('mouth_synth', opset=17)
    rgba = g.input('crop', [None, None, None, 4], dtype=TensorProto.UINT8)
    lips = g.input('lips', [None, K, 2])
    shape = g.input('shape', [None, 3])

    # --- pixel grid (crop-normalised pixel centres), S taken from the input ---
    s_int = g.op('Shape', rgba).gather(2, axis=0)
    # the crop only gives the colours of the lips, skin and teeth: RGB in [0,1], NCHW for GridSample
    crop = g.op('Slice', g.op('Transpose', rgba, perm=[0, 3, 1, 2]), g.const(np.asarray([0], np.int64)),
                g.const(np.asarray([3], np.int64)), g.const(np.asarray([1], np.int64)))
    crop = crop.cast(TensorProto.FLOAT) * (1.0 / 255.0)
    s_f = s_int.cast(TensorProto.FLOAT)
    px = 1.0 / s_f  # one pixel, normalised
    # Only the middle of the crop can change (a 10% border is kept as it is): every per-pixel
    # tensor below covers the window [b0, b1) of rows and columns, and is padded back at the end.
    b0 = g.op('Div', s_int, g.const(np.asarray(10, np.int64)))
    b1 = s_int - b0
    win = b1 - b0
    ramp = (g.op('Range', b0, b1, g.const(np.asarray(1, np.int64))).cast(TensorProto.FLOAT) + 0.5) / s_f
    X = ramp.reshape([1, 1, 1, -1])  # [1,1,1,w] columns
    Y = ramp.reshape([1, 1, -1, 1])  # [1,1,w,1] rows

    def i64(v):
        return g.const(np.asarray(v, np.int64))

    def sl(x, starts, ends, axes):
        return g.op('Slice', x, concat([v.reshape([1]) for v in starts], 0), concat([v.reshape([1]) for v in ends], 0),
                    i64(axes))

    def pad_hw(x, top, left, bottom, right):
        z = i64([0])
        pads = concat([z, z, top.reshape([1]), left.reshape([1]), z, z, bottom.reshape([1]), right.reshape([1])], 0)
        return g.op('Pad', x, pads, mode='constant')

    lx = lips.gather(0, axis=2)  # [N,K]
    ly = lips.gather(1, axis=2)

    def pt(i):  # -> [N,1,1,1]
        return lx.gather(i, axis=1).reshape([-1, 1, 1, 1]), ly.gather(i, axis=1).reshape([-1, 1, 1, 1])

    def par(i):
        return shape.gather(i, axis=1).reshape([-1, 1, 1, 1])

    o = par(0).clip(0.0, 1.25)
    wd = par(1).clip(-1.0, 1.0)
    rd = par(2).clip(0.0, 1.0)

    xr, yr = pt(20)
    xl, yl = pt(30)
    xa = xr.min(xl)
    xb = xr.max(xl)
    xc = (xa + xb) * 0.5
    hw = ((xb - xa) * 0.5).max(1e-3)  # half mouth width
    W = hw * 2.0
    _, y_chin = pt(CHIN)
    _, y_nose = pt(NOSE)
    _, y_mu = pt(5)
    _, y_ml = pt(15)
    y_mouth = (y_mu + y_ml) * 0.5

    # --- shape -> amounts (normalised crop units) ---
    drop = W * (o * LOWER_DROP * (1.0 - 0.3 * rd) + rd * LOWER_DROP_ROUND)
    lift = W * (o * UPPER_LIFT + rd * UPPER_LIFT_ROUND)
    corner = W * (wd * CORNER_WIDE - rd * CORNER_ROUND)
    p_exp = 0.85 - 0.4 * rd  # opening profile: lens (1) .. ellipse (0.5)

    # horizontal field: f(t) = t * g(t)/g(1), g = exp(-(t/1.4)^4); peaks at the corners, fades into the cheeks
    def fx(t):
        return t * ((t / 1.4).sq().sq() * -1.0 + (1.0 / 1.4) ** 4).exp()

    def dx_at(xq, vfall):
        return corner * fx((xq - xc) / hw) * vfall

    # per column, along the mouth line: source x of each output column
    xs1 = X - dx_at(X, 1.0)
    xs_line = X - dx_at(xs1, 1.0)  # [N,1,1,S]

    # lip curves per column, evaluated at the source columns
    sigma = W / 14.0
    inv2s2 = 1.0 / (sigma.sq() * 2.0)

    def curve(indices):
        cx = lx.take(indices, axis=1).reshape([0, -1, 1, 1])  # [N,M,1,1]
        cy = ly.take(indices, axis=1).reshape([0, -1, 1, 1])
        w = ((xs_line - cx).sq() * -inv2s2).exp() + 1e-12  # [N,M,1,S]
        return (w * cy).sum([1]) / w.sum([1])  # [N,1,1,S]

    yU = curve(INNER_UPPER)
    yL = curve(INNER_LOWER).max(yU)
    yOL = curve(OUTER_LOWER).max(yL)

    t_c = (xs_line - xc) / hw
    prof = (1.0 - t_c.sq()).relu() ** p_exp  # lips: 0 at the corners
    jaw = ((t_c / 1.75).sq().sq() * -1.0).exp()  # jaw: broad and flat
    drop_c = drop * prof
    lift_c = lift * prof
    yUo = yU - lift_c  # displaced upper inner lip (output space)
    yLo = yL + drop_c  # displaced lower inner lip

    # --- per pixel warp ---
    # vertical falloff of the horizontal field around the mouth line
    vfall = ((Y - y_mouth) / (W * 0.55)).sq() * -1.0
    vfall = vfall.exp()
    # the column's displacement on the mouth line (already inverted), attenuated away from it
    x_src = X - (X - xs_line) * vfall

    # lower region: lips -> jaw profile with depth, fading below the chin. The falloffs are
    # logistic steps (3 ops a pixel): centre and steepness are per column or per image.
    def step(x, e0, e1):  # ~smoothstep(e0, e1, x)
        mid = (_f(e0) + e1) * 0.5
        k = 5.5 / (_f(e1) - e0)
        return ((x - mid) * k).sigmoid()

    depth = step(Y - drop_c, yOL, y_chin)
    prof_jaw = drop * prof
    jaw_d = drop * (jaw - prof)
    d_low = prof_jaw + jaw_d * depth
    neck = step(Y - d_low, y_chin + W * NECK_FALLOFF, y_chin)  # 1 above the chin, 0 below the neck band
    y_low = Y - d_low * neck
    # upper region: the lift fades towards the nose
    y_up = Y + lift_c * step(Y + lift_c, y_nose, yU)
    # the opening: the original inner band stretched
    gap_o = yLo - yUo
    gap_i = yL - yU
    # The portrait's own opening (teeth, if it shows them) splits: its upper part (UPPER_SHARE)
    # stays with the upper lip and the teeth, the rest goes down with the lower lip; the new
    # space between them is filled by the inner-mouth layer below.
    top_new = yUo + gap_i * UPPER_SHARE
    bot_new = yLo - gap_i * (1.0 - UPPER_SHARE)
    y_in = where(Y < top_new, Y + lift_c, where(Y > bot_new, Y - drop_c, yU + gap_i * UPPER_SHARE))
    y_src = where(Y < yUo, y_up, where(Y > yLo, y_low, y_in))

    # keep the crop's border untouched
    bx = smoothstep(0.1, 0.17, X.min(1.0 - X))  # 0 outside the window, so padding back is seamless
    by = smoothstep(0.1, 0.17, Y.min(1.0 - Y))
    border = bx * by
    dxs = (x_src - X) * border
    dys = (y_src - Y) * border
    # Under 0.05 px of motion counts as none, fading in up to 0.5 px (keeps the changed region small
    # and exactly zero where nothing visibly moves).
    moved = (dxs.abs() + dys.abs()) / px
    gate = ((moved - 0.05) / 0.45).clip(0.0, 1.0) * s_f  # normalised -> crop pixels
    warp = concat([dxs * gate, dys * gate], axis=1)  # [N,2,w,w], source offset in crop pixels

    # --- colours sampled from the crop itself ---
    lip_idx = [3, 4, 5, 6, 7, 13, 14, 15, 16, 17]
    mx = (lx.take(lip_idx, axis=1) + lx.take([20 + i for i in lip_idx], axis=1)) * 0.5  # [N,10]
    my = (ly.take(lip_idx, axis=1) + ly.take([20 + i for i in lip_idx], axis=1)) * 0.5
    lgrid = concat([mx.reshape([0, 1, -1, 1]), my.reshape([0, 1, -1, 1])], axis=3) * 2.0 - 1.0  # [N,1,10,2]
    lip_rgb = g.op('GridSample', crop, lgrid, mode='bilinear', padding_mode='border', align_corners=0).mean([2, 3])
    # skin: below the lower lip and beside the corners
    _, y_olm = pt(35)
    sx = concat([xc, xc - W * 0.15, xc + W * 0.15, xa - W * 0.18, xb + W * 0.18], axis=1)  # [N,5,1,1]
    y_sk = y_olm + (y_chin - y_olm) * 0.45
    sy = concat([y_sk, y_sk, y_sk, y_mouth + W * 0.08, y_mouth + W * 0.08], axis=1)
    sgrid = concat([sx.reshape([0, 1, -1, 1]), sy.reshape([0, 1, -1, 1])], axis=3) * 2.0 - 1.0
    skin_rgb = g.op('GridSample', crop, sgrid, mode='bilinear', padding_mode='border', align_corners=0).mean([2, 3])
    lum_w = g.const(np.asarray([0.299, 0.587, 0.114], np.float32).reshape(1, 3, 1, 1))
    skin_l = (skin_rgb * lum_w).sum([1])  # [N,1,1,1]

    # --- inner mouth layer (output space), on the sub-window that holds every opening of the batch ---
    def reduce_all(op, x):
        return g.op(op, x, keepdims=0)

    row_lo = reduce_all('ReduceMin', yUo) * s_f - 2.0
    row_hi = reduce_all('ReduceMax', yLo) * s_f + 2.0
    col_lo = reduce_all('ReduceMin', xa - corner.abs()) * s_f - 2.0
    col_hi = reduce_all('ReduceMax', xb + corner.abs()) * s_f + 2.0

    def to_win(v, lo):
        i = g.op('Floor', v).cast(TensorProto.INT64) - b0
        return g.op('Max', g.op('Min', i, win), lo)

    zero = i64(0)
    ra = to_win(row_lo, zero)
    rb = g.op('Max', to_win(row_hi, zero), ra + i64(1))
    rb = g.op('Min', rb, win)
    ra = g.op('Min', ra, rb - i64(1))
    ca = to_win(col_lo, zero)
    cb = g.op('Min', g.op('Max', to_win(col_hi, zero), ca + i64(1)), win)
    ca = g.op('Min', ca, cb - i64(1))
    Y = sl(Y, [ra], [rb], [2])
    X = sl(X, [ca], [cb], [3])
    yU, yUo, yLo, t_c, drop_c, lift_c, gap_o, top_new, bot_new = [
        sl(v, [ca], [cb], [3]) for v in (yU, yUo, yLo, t_c, drop_c, lift_c, gap_o, top_new, bot_new)]
    d_edge = (Y - top_new).min(bot_new - Y)  # distance inside the new space
    inside = (d_edge / px + 0.5).clip(0.0, 1.0)
    d_lip = (Y - yUo).min(yLo - Y)  # distance from the lips
    added_px = (drop_c + lift_c) / px
    # The synthetic interior fades in with the gap the shape adds, quadratically over the first
    # 3 px (no jump at the first frames of speech).
    grow = (added_px / 3.0).clip(0.0, 1.0)
    fade = grow * grow
    alpha = inside * fade
    at = t_c.abs()

    # cavity: the lips' own tint, darkened; lighter and redder at the wet inner lip edges
    glow = ((d_lip.relu() / (W * 0.045)) * -1.0).exp()
    deep = lip_rgb * lip_rgb  # darker and more saturated than the lips
    cavity = deep * (0.10 + 0.55 * glow) + lip_rgb * 0.03

    # tongue: low in the opening, behind the lower teeth; darker towards the back (its top edge)
    y_tongue = yLo - gap_o * (0.48 - 0.28 * t_c.sq())
    a_tongue = ((Y - y_tongue) / (px * 3.0)).clip(0.0, 1.0) * (1.0 - smoothstep(0.55, 0.95, at))
    a_tongue = a_tongue * smoothstep(0.05, 0.16, gap_o / W)
    tongue_shade = 0.45 + 0.55 * smoothstep(y_tongue, yLo, Y)
    tongue = lip_rgb * g.const(np.asarray([0.95, 0.72, 0.72], np.float32).reshape(1, 3, 1, 1)) * tongue_shade

    # teeth colour: ivory, brightness from the lighting on the skin, a little of the lips' tint
    bright = (skin_l * 0.45 + 0.5).clip(0.6, 0.9)
    ivory = g.const(np.asarray([1.0, 0.95, 0.86], np.float32).reshape(1, 3, 1, 1))
    teeth = ivory * bright * 0.94 + lip_rgb * 0.06 * bright
    # A portrait that shows its teeth gives their colour: sample the upper part of its opening.
    _, y_iu = pt(5)
    _, y_il = pt(15)
    g_mid = (y_il - y_iu).relu()
    ty = y_iu + g_mid * 0.35
    tx = concat([xc - W * 0.1, xc, xc + W * 0.1], axis=1)
    tgrid = concat([tx.reshape([0, 1, -1, 1]), concat([ty, ty, ty], axis=1).reshape([0, 1, -1, 1])], axis=3) * 2.0 - 1.0
    own = g.op('GridSample', crop, tgrid, mode='bilinear', padding_mode='border', align_corners=0).mean([2, 3])
    own_l = (own * lum_w).sum([1])
    use_own = ((g_mid / px - 3.0) / 3.0).clip(0.0, 1.0) * ((own_l - 0.4) / 0.15).clip(0.0, 1.0)
    teeth = lerp(teeth, own * 1.02, use_own)

    # tooth separations on an arch: equal steps in angle around the dental arch
    phi = (t_c * 0.92).clip(-0.99, 0.99).asin()
    tooth_wave = (phi * (2.0 * np.pi / 0.32)).cos()
    sep = (tooth_wave * 0.5 + 0.5) ** 6.0  # 1 at the gaps between teeth, [N,1,1,S]
    # each tooth a little rounder (lighter in its middle) and not all alike (alternate a touch darker)
    per_tooth = (0.93 + 0.09 * (0.5 - 0.5 * tooth_wave)) * (1.0 + 0.045 * (phi * (np.pi / 0.32) + 0.6 - np.pi / 2).cos())

    # upper teeth: fixed to the skull, edge a little below the resting upper lip line, arching up at the sides
    y_edge = yU + W * (TOOTH_LEN * (1.0 - 0.35 * t_c.sq()) - 0.008 * sep)
    # rounded lips ("oo") cover most of the teeth
    a_up = ((y_edge - Y) / (px * 1.3) + 0.5).clip(0.0, 1.0) * (1.0 - smoothstep(0.45, 0.88, at)) * (1.0 - 0.6 * rd)
    up_shade = (0.55 + 0.45 * smoothstep(yUo, yUo + W * 0.06, Y)) * (1.0 - 0.4 * t_c.sq()) * (1.0 - 0.12 * sep) * per_tooth
    up_shade = up_shade * (1.0 - 0.15 * smoothstep(y_edge - W * 0.03, y_edge, Y))
    up_teeth = teeth * up_shade

    # lower teeth: on the jaw, mostly hidden by the lower lip, only their edges seen when well open
    y_low_edge = yLo - W * 0.035 * (1.0 - 0.5 * t_c.sq())
    a_lo = ((Y - y_low_edge) / (px * 1.3) + 0.5).clip(0.0, 1.0) * (1.0 - smoothstep(0.3, 0.6, at))
    a_lo = a_lo * smoothstep(0.18, 0.32, gap_o / W) * 0.7
    lo_teeth = teeth * (0.7 * (1.0 - 0.12 * sep))

    inner = lerp(cavity, tongue, a_tongue)
    inner = lerp(inner, lo_teeth, a_lo)
    inner = lerp(inner, up_teeth, a_up)
    # premultiplied by its coverage, in frame levels, with the coverage itself
    inner_pm = concat([inner * alpha * 255.0, alpha], axis=1)  # [N,4,h,k]
    inner_at = concat([(b0 + ra).reshape([1]), (b0 + ca).reshape([1])], 0)

    g.output(warp, 'warp', ['N', 2, 'w', 'w'])
    g.output(inner_pm, 'inner', ['N', 4, 'h', 'k'])
    g.output(inner_at, 'inner_at', [2], dtype=TensorProto.INT64)
    return g.model(doc='Built-in mouth synthesis for avatar-platform; see render/models/build/synth/build_synth.py')


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = os.path.normpath(os.path.join(here, '..', '..', 'synth'))
    os.makedirs(out_dir, exist_ok=True)
    model = build()
    path = os.path.join(out_dir, 'mouth_synth.onnx')
    onnx.save(model, path)
    print(f'wrote {path} ({os.path.getsize(path)} bytes, {len(model.graph.node)} nodes)')


if __name__ == '__main__':
    main()
