//! From recognised text segments to notebook lines: which segments form a line, and what the
//! line is (a heading, a task with its checkbox ticked or not, a bullet, text). Engine-neutral:
//! the local engine and Textract both end here.
//!
//! Checkboxes are found in the pixels, not guessed from glyphs (engines read a drawn square as
//! `口`, `□`, `O`, `D`, `C1`, or nothing): left of each line we look for the square whose four
//! edges are best covered by ink ([`find_checkbox`]), and call it ticked when its inside holds
//! ink. Whatever text an engine read inside the square is dropped. A bullet is a small blob (a
//! dot or a dash) before the line, or a `-`/`•` the engine read; a heading is a line written
//! clearly larger than the page's median, or one underlined by a long stroke.

use crate::{OcrBox, OcrLine, PageImage};

/// Lines read with less confidence than this are marked unsure.
pub const UNSURE_BELOW: f32 = 0.75;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Heading,
    Task { done: bool },
    Bullet,
    Text,
}

/// One line of the page as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: Kind,
    pub text: String,
    /// The engine's confidence in the text (length-weighted over its segments), 0..1.
    pub confidence: f32,
    pub bbox: OcrBox,
}

impl Line {
    pub fn unsure(&self) -> bool {
        self.confidence < UNSURE_BELOW
    }

    /// The line as nib's markdown writes it.
    pub fn markdown(&self) -> String {
        match self.kind {
            Kind::Heading => format!("# {}", self.text),
            Kind::Task { done: false } => format!("- [ ] {}", self.text),
            Kind::Task { done: true } => format!("- [x] {}", self.text),
            Kind::Bullet => format!("- {}", self.text),
            Kind::Text => self.text.clone(),
        }
    }
}

/// Dark-pixel view of the page: what counts as ink.
///
/// Scans differ a lot: dark-blue ink on bright paper, pencil or light grey strokes a blur
/// has thinned to a few levels below the paper, soft shading across the sheet. So ink is
/// measured as darkness below the local paper level (per block), on a lightly smoothed page
/// (a 3x3 mean takes the grain out), and the ink threshold follows the page's own stroke
/// contrast: about 40 % of a typical stroke's darkness, never down into the noise.
struct Ink {
    width: usize,
    height: usize,
    /// Darkness below the local paper level, 0..255, per pixel.
    dark: Vec<u8>,
    /// Darkness at which a pixel counts as ink.
    threshold: u8,
    /// A lower level for faint marks (light ticks), still clear of the paper's noise.
    faint: u8,
}

impl Ink {
    const BLOCK: usize = 64;

    fn new(page: &PageImage) -> Self {
        let (w, h) = (page.width as usize, page.height as usize);
        let g = &page.gray;
        // 3x3 mean, separable.
        let mut rows = vec![0u16; w * h];
        for y in 0..h {
            let r = &g[y * w..(y + 1) * w];
            for x in 0..w {
                let a = r[x.saturating_sub(1)] as u16;
                let c = r[(x + 1).min(w - 1)] as u16;
                rows[y * w + x] = a + r[x] as u16 + c;
            }
        }
        let mut smooth = vec![0u8; w * h];
        for y in 0..h {
            let (ya, yc) = (y.saturating_sub(1), (y + 1).min(h - 1));
            for x in 0..w {
                let sum = rows[ya * w + x] + rows[y * w + x] + rows[yc * w + x];
                smooth[y * w + x] = (sum / 9) as u8;
            }
        }
        // Paper level per block: a high percentile (the paper is the bright majority).
        let b = Self::BLOCK;
        let (bw, bh) = (w.div_ceil(b), h.div_ceil(b));
        let mut paper = vec![255u8; bw * bh];
        for by in 0..bh {
            for bx in 0..bw {
                let mut hist = [0u32; 256];
                let mut n = 0u32;
                for y in (by * b..((by + 1) * b).min(h)).step_by(2) {
                    for x in (bx * b..((bx + 1) * b).min(w)).step_by(2) {
                        hist[smooth[y * w + x] as usize] += 1;
                        n += 1;
                    }
                }
                let mut acc = 0;
                for (v, &c) in hist.iter().enumerate() {
                    acc += c;
                    if acc * 10 >= n * 7 {
                        paper[by * bw + bx] = v as u8;
                        break;
                    }
                }
            }
        }
        let mut dark = vec![0u8; w * h];
        let mut hist = [0u32; 256];
        for y in 0..h {
            let prow = &paper[(y / b) * bw..];
            for x in 0..w {
                let d = prow[x / b].saturating_sub(smooth[y * w + x]);
                dark[y * w + x] = d;
                hist[d as usize] += 1;
            }
        }
        // A typical stroke's darkness: the median of what is clearly not paper.
        let clear = 30usize;
        let strong: u32 = hist[clear..].iter().sum();
        let mut acc = 0;
        let mut typical = 100usize;
        for (d, &c) in hist.iter().enumerate().skip(clear) {
            acc += c;
            if acc * 2 >= strong {
                typical = d;
                break;
            }
        }
        let threshold = ((typical as f32 * 0.4) as u8).clamp(18, 70);
        let faint = (threshold / 2).max(12);
        Ink {
            width: w,
            height: h,
            dark,
            threshold,
            faint,
        }
    }

    fn darkness(&self, x: i64, y: i64) -> u8 {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return 0;
        }
        self.dark[y as usize * self.width + x as usize]
    }

    fn dark(&self, x: i64, y: i64) -> bool {
        self.darkness(x, y) >= self.threshold
    }
}

/// A window of the page's ink with prefix sums along rows and columns, so the coverage of any
/// horizontal or vertical edge is O(1).
struct Window {
    x0: i64,
    y0: i64,
    w: usize,
    h: usize,
    /// Ink within `band` rows of (x, y), prefix-summed along x, per row.
    rows: Vec<u32>,
    /// Ink within `band` columns of (x, y), prefix-summed along y, per column.
    cols: Vec<u32>,
    /// Plain ink, 2-D prefix sums (area counts).
    area: Vec<u32>,
}

impl Window {
    fn new(ink: &Ink, x0: i64, y0: i64, w: usize, h: usize, band: i64) -> Window {
        let mut dark = vec![false; w * h];
        for y in 0..h {
            for x in 0..w {
                dark[y * w + x] = ink.dark(x0 + x as i64, y0 + y as i64);
            }
        }
        let near = |x: usize, y: usize, vertical: bool| -> bool {
            (-band..=band).any(|d| {
                let (xx, yy) = if vertical {
                    (x as i64, y as i64 + d)
                } else {
                    (x as i64 + d, y as i64)
                };
                xx >= 0
                    && yy >= 0
                    && (xx as usize) < w
                    && (yy as usize) < h
                    && dark[yy as usize * w + xx as usize]
            })
        };
        let mut rows = vec![0u32; h * (w + 1)];
        for y in 0..h {
            for x in 0..w {
                rows[y * (w + 1) + x + 1] = rows[y * (w + 1) + x] + u32::from(near(x, y, true));
            }
        }
        let mut cols = vec![0u32; w * (h + 1)];
        for x in 0..w {
            for y in 0..h {
                cols[x * (h + 1) + y + 1] = cols[x * (h + 1) + y] + u32::from(near(x, y, false));
            }
        }
        let mut area = vec![0u32; (w + 1) * (h + 1)];
        for y in 0..h {
            for x in 0..w {
                area[(y + 1) * (w + 1) + x + 1] = u32::from(dark[y * w + x])
                    + area[y * (w + 1) + x + 1]
                    + area[(y + 1) * (w + 1) + x]
                    - area[y * (w + 1) + x];
            }
        }
        Window {
            x0,
            y0,
            w,
            h,
            rows,
            cols,
            area,
        }
    }

    /// Fraction of x in [x, x+len) where row y has ink nearby.
    fn hrun(&self, x: usize, y: usize, len: usize) -> f32 {
        let r = &self.rows[y * (self.w + 1)..];
        (r[x + len] - r[x]) as f32 / len as f32
    }

    /// Fraction of y in [y, y+len) where column x has ink nearby.
    fn vrun(&self, x: usize, y: usize, len: usize) -> f32 {
        let c = &self.cols[x * (self.h + 1)..];
        (c[y + len] - c[y]) as f32 / len as f32
    }

    /// Ink pixels in [x0, x1) x [y0, y1).
    fn ink(&self, x0: usize, y0: usize, x1: usize, y1: usize) -> u32 {
        let w = self.w + 1;
        self.area[y1 * w + x1] + self.area[y0 * w + x0]
            - self.area[y0 * w + x1]
            - self.area[y1 * w + x0]
    }
}

/// A checkbox found in the pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Checkbox {
    pub bbox: OcrBox,
    pub ticked: bool,
}

/// The square, if any, drawn left of (or at the very start of) a line of height `line_h`
/// whose text starts at `start_x` with its vertical centre at `cy`.
fn find_checkbox(ink: &Ink, start_x: f32, cy: f32, line_h: f32) -> Option<Checkbox> {
    let x0 = (start_x - 2.6 * line_h).floor() as i64;
    let x1 = (start_x + 1.4 * line_h).ceil() as i64;
    let y0 = (cy - 1.1 * line_h).floor() as i64;
    let y1 = (cy + 1.1 * line_h).ceil() as i64;
    let (w, h) = ((x1 - x0).max(1) as usize, (y1 - y0).max(1) as usize);
    let band = ((line_h * 0.05).round() as i64).max(2);
    let win = Window::new(ink, x0, y0, w, h, band);
    let min_side = (line_h * 0.35).max(8.0) as usize;
    let body = text_body(ink, start_x, cy, line_h);
    let max_side = ((line_h * 1.3) as usize).min(w.min(h).saturating_sub(1));
    let mut candidates: Vec<(f32, usize, usize, usize)> = Vec::new();
    for side in (min_side..=max_side).step_by(2) {
        for top in 0..h.saturating_sub(side) {
            // The square must sit across the line's middle.
            let mid = y0 as f32 + top as f32 + side as f32 / 2.0;
            if (mid - cy).abs() > line_h * 0.35 {
                continue;
            }
            for left in 0..w.saturating_sub(side) {
                // The box is before the text, or where the text's box begins (engines often
                // take the square into the line): never inside the words.
                if x0 as f32 + left as f32 > start_x + 0.35 * line_h {
                    break;
                }
                let l = win.vrun(left, top, side);
                if l < 0.7 {
                    continue;
                }
                let r = win.vrun(left + side, top, side);
                if r < 0.7 {
                    continue;
                }
                let t = win.hrun(left, top, side);
                let b = win.hrun(left, top + side, side);
                let score = l.min(r).min(t).min(b);
                if score >= 0.7 {
                    // Prefer the squares best covered, then the larger (a square inside a
                    // ticked square's cross is not the box).
                    candidates.push((score + side as f32 * 0.002, left, top, side));
                }
            }
        }
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
    let features = |&(key, left, top, side): &(f32, usize, usize, usize)| {
        Features::of(&win, body, y0, key, left, top, side)
    };
    // The model's training data: the best square's features per line.
    if std::env::var_os("NIB_OCR_FEATURES").is_some() {
        match candidates.first() {
            Some(c) => eprintln!("FEAT\t{cy:.0}\t{}", features(c).tsv()),
            None => eprintln!("FEAT\t{cy:.0}\tNA"),
        }
    }
    // The best-covered square decides: a box, or letters.
    let best = candidates.first().filter(|c| features(c).accept());
    let (_, left, top, side) = *best?;
    // A solid blob is a bullet dot, not a box: even a scribbled box keeps paper between its
    // strokes.
    if win.ink(left + 2, top + 2, left + side - 1, top + side - 1) as f32
        >= 0.97 * ((side - 3) * (side - 3)) as f32
    {
        return None;
    }
    // Ticked: ink well inside the square (away from its edges).
    let margin = ((side as f32) * 0.22).ceil() as usize;
    let (ix0, iy0) = (left + margin, top + margin);
    let (ix1, iy1) = (left + side - margin, top + side - margin);
    let inner = (ix1.saturating_sub(ix0) * iy1.saturating_sub(iy0)).max(1);
    let fill = win.ink(ix0, iy0, ix1, iy1) as f32 / inner as f32;
    // A light tick (a lighter, thinner stroke) can stay under the ink threshold: count what
    // is clearly darker than the paper's grain too.
    let faint = (win.y0 + iy0 as i64..win.y0 + iy1 as i64)
        .flat_map(|y| (win.x0 + ix0 as i64..win.x0 + ix1 as i64).map(move |x| (x, y)))
        .filter(|&(x, y)| ink.darkness(x, y) >= ink.faint)
        .count() as f32
        / inner as f32;
    Some(Checkbox {
        bbox: OcrBox {
            x: (win.x0 + left as i64) as f32,
            y: (win.y0 + top as i64) as f32,
            w: side as f32,
            h: side as f32,
        },
        ticked: fill > 0.04 || faint > 0.06,
    })
}

/// What tells a drawn box from a square found in the strokes of letters.
#[derive(Debug, Clone, Copy)]
struct Features {
    score: f32,
    corners: f32,
    /// Side over the height of the letters' bodies (NaN when unknown).
    rel_side: f32,
    /// (bottom - baseline) over the body height (NaN when unknown).
    rel_bottom: f32,
    left: f32,
    above: f32,
    below: f32,
    right_gap: f32,
    left_clean: f32,
    above_clean: f32,
    below_clean: f32,
}

impl Features {
    fn of(
        win: &Window,
        body: Option<(f32, f32)>,
        y0: i64,
        key: f32,
        left: usize,
        top: usize,
        side: usize,
    ) -> Features {
        let (rel_side, rel_bottom) = match body {
            Some((body_top, baseline)) => {
                let body_h = baseline - body_top;
                let bottom = (y0 + (top + side) as i64) as f32;
                (side as f32 / body_h, (bottom - baseline) / body_h)
            }
            None => (f32::NAN, f32::NAN),
        };
        let [l, a, b, g] = isolation(win, left, top, side, false);
        let [lc, ac, bc, _] = isolation(win, left, top, side, true);
        Features {
            score: key - side as f32 * 0.002,
            corners: corner_coverage(win, left, top, side),
            rel_side,
            rel_bottom,
            left: l,
            above: a,
            below: b,
            right_gap: g,
            left_clean: lc,
            above_clean: ac,
            below_clean: bc,
        }
    }

    /// The measurements, in the order `NIB_OCR_FEATURES` prints them.
    fn raw(&self) -> [f32; 11] {
        [
            self.score,
            self.corners,
            self.rel_side,
            self.rel_bottom,
            self.left,
            self.above,
            self.below,
            self.right_gap,
            self.left_clean,
            self.above_clean,
            self.below_clean,
        ]
    }

    fn tsv(&self) -> String {
        self.raw().map(|v| format!("{v:.3}")).join("\t")
    }

    /// The inputs of [`BOX_WEIGHTS`], in its order.
    fn inputs(&self) -> [f32; 14] {
        let [score, corners, rel_side, rel_bottom, isolation @ ..] = self.raw();
        let known = !rel_side.is_nan();
        let (rel_side, rel_bottom) = if known {
            (rel_side, rel_bottom)
        } else {
            (1.3, 0.0)
        };
        let mut inputs = [1.0; 14];
        inputs[..6].copy_from_slice(&[
            score,
            corners,
            rel_side.min(2.5),
            rel_bottom.abs(),
            rel_bottom.max(0.0),
            if known { 0.0 } else { 1.0 },
        ]);
        inputs[6..13].copy_from_slice(&isolation);
        inputs
    }

    /// Whether the square is a drawn box: a logistic model over the features, fit on
    /// generated pages by `tests/ocr/fit_checkbox.py` (see there).
    fn accept(&self) -> bool {
        let z: f32 = self
            .inputs()
            .iter()
            .zip(BOX_WEIGHTS)
            .map(|(x, w)| x * w)
            .sum();
        z > 0.0
    }
}

/// Weights of the box model, from `tests/ocr/fit_checkbox.py`.
const BOX_WEIGHTS: [f32; 14] = [
    11.5516, 2.0669, 2.1518, -0.3814, -0.0968, -0.7568, -3.5831, -4.9604, -4.4815, -3.0138,
    -8.0398, -1.3391, -6.3536, -10.9698,
];

/// The band the writing's letters fill (from the top of their bodies down to the baseline),
/// measured on the words right of where any box could be: the rows holding most of the ink.
fn text_body(ink: &Ink, start_x: f32, cy: f32, line_h: f32) -> Option<(f32, f32)> {
    let x0 = (start_x + 1.7 * line_h) as i64;
    let x1 = (start_x + 4.5 * line_h) as i64;
    let y0 = (cy - 0.7 * line_h) as i64;
    let y1 = (cy + 0.7 * line_h) as i64;
    // Ink in runs shorter than a letter is wide: ruled lines and underlines are left out.
    let longest = (1.2 * line_h) as usize;
    let rows: Vec<usize> = (y0..y1)
        .map(|y| {
            let (mut total, mut run) = (0, 0);
            for x in x0..=x1 {
                if x < x1 && ink.dark(x, y) {
                    run += 1;
                } else {
                    if run < longest {
                        total += run;
                    }
                    run = 0;
                }
            }
            total
        })
        .collect();
    let (peak, &most) = rows.iter().enumerate().max_by_key(|(_, c)| **c)?;
    if most < 3 {
        return None;
    }
    let floor = most * 35 / 100;
    let mut top = peak;
    while top > 0 && rows[top - 1] >= floor {
        top -= 1;
    }
    let mut bottom = peak;
    while bottom + 1 < rows.len() && rows[bottom + 1] >= floor {
        bottom += 1;
    }
    let (top, bottom) = (y0 as f32 + top as f32, y0 as f32 + bottom as f32 + 1.0);
    (bottom - top >= 0.15 * line_h).then_some((top, bottom))
}

/// How far the square's four edges run into its corners (the least covered of the eight
/// edge ends): drawn strokes do, the curves of an O, a D or the bowl of an R do not.
fn corner_coverage(win: &Window, left: usize, top: usize, side: usize) -> f32 {
    let end = (side / 4).max(3);
    let far = side - end;
    [
        win.hrun(left, top, end),
        win.hrun(left + far, top, end),
        win.hrun(left, top + side, end),
        win.hrun(left + far, top + side, end),
        win.vrun(left, top, end),
        win.vrun(left, top + far, end),
        win.vrun(left + side, top, end),
        win.vrun(left + side, top + far, end),
    ]
    .into_iter()
    .fold(1.0, f32::min)
}

/// How apart from other ink the square at (left, top) stands, as a drawn box does and a
/// square found in the strokes of letters does not: the ink left of it, above and below it
/// (a tick may overshoot), and in the gap on its right before the words; as fractions of
/// each strip. With `clean`, rows (columns) a straight stroke runs along are left out of
/// the strips above and below (left): a neighbour's box drawn touching this one, or this
/// box's own edge skewed into the strip, is not the ink of letters.
fn isolation(win: &Window, left: usize, top: usize, side: usize, clean: bool) -> [f32; 4] {
    let strip = (side / 4).max(3);
    let part = |x0: usize, y0: usize, x1: usize, y1: usize, along_rows: bool| {
        if clean {
            clear_of_lines(win, x0, y0, x1, y1, along_rows)
        } else {
            fraction_in(win, x0, y0, x1, y1)
        }
    };
    let inset = side / 8;
    let (inner_top, inner_bottom) = (top + inset, top + side - inset);
    let (inner_left, inner_right) = (left + inset, left + side - inset);
    let off = (side / 12).max(2);
    let left_strip = part(
        left.saturating_sub(strip + off),
        inner_top,
        left.saturating_sub(off),
        inner_bottom,
        false,
    );
    let above = part(
        inner_left,
        top.saturating_sub(strip + 2),
        inner_right,
        top.saturating_sub(2),
        true,
    );
    let below = part(
        inner_left,
        top + side + 3,
        inner_right,
        top + side + 3 + strip,
        true,
    );
    // The gap before the words: writers leave a clear space after a box (a third of a capital
    // or more), while the bowl of an R or the loop of an O sits a letter gap from the next
    // letter. Only its lower part: a check mark leaves the box through the top right.
    let gap_from = left + side + side * 6 / 100 + 2;
    let right_gap = fraction_in(
        win,
        gap_from,
        top + side * 3 / 10,
        gap_from + (side * 12 / 100).max(3),
        inner_bottom,
    );
    [left_strip, above, below, right_gap]
}

/// The ink fraction of [x0, x1) x [y0, y1).
fn fraction_in(win: &Window, x0: usize, y0: usize, x1: usize, y1: usize) -> f32 {
    let (x1, y1) = (x1.min(win.w), y1.min(win.h));
    if x1 <= x0 || y1 <= y0 {
        return 0.0;
    }
    win.ink(x0, y0, x1, y1) as f32 / ((x1 - x0) * (y1 - y0)) as f32
}

/// The ink fraction of [x0, x1) x [y0, y1) without the rows (`along_rows`) or columns a
/// straight stroke runs along.
fn clear_of_lines(
    win: &Window,
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
    along_rows: bool,
) -> f32 {
    let (x1, y1) = (x1.min(win.w), y1.min(win.h));
    if x1 <= x0 || y1 <= y0 {
        return 0.0;
    }
    let (mut ink, mut area) = (0u32, 0usize);
    if along_rows {
        for y in y0..y1 {
            if win.hrun(x0, y, x1 - x0) < 0.6 {
                ink += win.ink(x0, y, x1, y + 1);
                area += x1 - x0;
            }
        }
    } else {
        for x in x0..x1 {
            if win.vrun(x, y0, y1 - y0) < 0.6 {
                ink += win.ink(x, y0, x + 1, y1);
                area += y1 - y0;
            }
        }
    }
    if area == 0 {
        0.0
    } else {
        ink as f32 / area as f32
    }
}

/// A small blob (a dot or a short dash) first on the line, apart from the words: a bullet.
/// Engines often take the dot into the line's box and drop it from the text, so the search
/// runs from left of the box into its start.
fn find_bullet(ink: &Ink, start_x: f32, cy: f32, line_h: f32) -> bool {
    let x0 = (start_x - 1.5 * line_h).floor() as i64;
    let x1 = (start_x + 0.8 * line_h).ceil() as i64;
    let y0 = (cy - 0.3 * line_h).floor() as i64;
    let y1 = (cy + 0.3 * line_h).ceil() as i64;
    let column_has_ink = |x: i64| (y0..y1).any(|y| ink.dark(x, y));
    // The first cluster of inked columns, up to a gap.
    let Some(first) = (x0..x1).find(|&x| column_has_ink(x)) else {
        return false;
    };
    let min_gap = (0.12 * line_h).max(4.0) as i64;
    let mut last = first;
    let mut x = first;
    while x < x1 && x - last <= min_gap {
        if column_has_ink(x) {
            last = x;
        }
        x += 1;
    }
    if x - last <= min_gap {
        // No gap after it before the window ends: part of the words.
        return false;
    }
    let (mut miny, mut maxy, mut n) = (i64::MAX, i64::MIN, 0);
    for x in first..=last {
        for y in y0..y1 {
            if ink.dark(x, y) {
                miny = miny.min(y);
                maxy = maxy.max(y);
                n += 1;
            }
        }
    }
    let (bw, bh) = ((last - first + 1) as f32, (maxy - miny + 1) as f32);
    // Touching the window's top or bottom: a stroke of something taller.
    if miny <= y0 || maxy >= y1 - 1 {
        return false;
    }
    let fill = n as f32 / (bw * bh);
    let dot = bw <= 0.35 * line_h && bh <= 0.35 * line_h && bw >= 3.0 && fill >= 0.6;
    let dash = bw >= 0.08 * line_h && bw <= 0.5 * line_h && bh <= 0.12 * line_h && bw >= 2.0 * bh;
    dot || dash
}

/// An underline: a long stroke just below the line, across most of it.
fn underlined(ink: &Ink, bbox: &OcrBox) -> bool {
    let x0 = bbox.x as i64;
    let x1 = bbox.right() as i64;
    let len = (x1 - x0).max(1);
    let y_from = (bbox.bottom() - 0.35 * bbox.h) as i64;
    let y_to = (bbox.bottom() + 0.6 * bbox.h) as i64;
    let band = 3;
    (y_from..y_to).any(|y| {
        let covered = (x0..x1)
            .filter(|&x| (-band..=band).any(|d| ink.dark(x, y + d)))
            .count() as i64;
        covered * 10 >= len * 8
    })
}

/// Segments grouped into lines: by vertical position, each line read left to right.
fn group(mut segments: Vec<OcrLine>) -> Vec<Vec<OcrLine>> {
    segments.sort_by(|a, b| a.bbox.center_y().total_cmp(&b.bbox.center_y()));
    let mut lines: Vec<Vec<OcrLine>> = Vec::new();
    for s in segments {
        // The line whose horizontally nearest segment sits at this height.
        let fits = lines.iter_mut().rev().take(4).find(|line| {
            let nearest = line
                .iter()
                .min_by(|a, b| gap(&a.bbox, &s.bbox).total_cmp(&gap(&b.bbox, &s.bbox)))
                .expect("lines are not empty");
            let overlap_x = s.bbox.x < nearest.bbox.right() - 0.3 * nearest.bbox.h
                && nearest.bbox.x < s.bbox.right() - 0.3 * nearest.bbox.h;
            let dy = (nearest.bbox.center_y() - s.bbox.center_y()).abs();
            !overlap_x && dy < 0.45 * nearest.bbox.h.min(s.bbox.h)
        });
        match fits {
            Some(line) => line.push(s),
            None => lines.push(vec![s]),
        }
    }
    for line in &mut lines {
        line.sort_by(|a, b| a.bbox.x.total_cmp(&b.bbox.x));
    }
    lines.sort_by(|a, b| {
        let ya = a[0].bbox.center_y();
        let yb = b[0].bbox.center_y();
        ya.total_cmp(&yb)
    });
    lines
}

/// The horizontal gap between two boxes (0 when they overlap).
fn gap(a: &OcrBox, b: &OcrBox) -> f32 {
    (b.x - a.right()).max(a.x - b.right()).max(0.0)
}

fn union(a: &OcrBox, b: &OcrBox) -> OcrBox {
    let x = a.x.min(b.x);
    let y = a.y.min(b.y);
    OcrBox {
        x,
        y,
        w: a.right().max(b.right()) - x,
        h: a.bottom().max(b.bottom()) - y,
    }
}

/// Characters engines read for a drawn square, or for its tick.
fn is_box_glyph(c: char) -> bool {
    matches!(
        c,
        '□' | '☐'
            | '☑'
            | '☒'
            | '■'
            | '▢'
            | '口'
            | '囗'
            | '回'
            | '['
            | ']'
            | '('
            | ')'
            | '|'
            | '{'
            | '}'
            | '<'
            | '>'
            | '✓'
            | '✔'
            | '✗'
            | '✘'
            | '×'
            | '√'
            | '∨'
            | '£'
            | '¤'
            | '#'
    )
}

/// A bullet mark an engine read at the start of a line: a dash or a dot of its own, or a
/// bullet dot read as a full stop, a comma or an underscore (those only with a space after
/// them, so ".5 kg" stays).
fn strip_bullet_mark(text: &str) -> Option<&str> {
    let t = text.trim_start();
    let mut chars = t.chars();
    let first = chars.next()?;
    let after = chars.as_str();
    let spaced = after.starts_with(char::is_whitespace);
    if matches!(
        first,
        '-' | '•' | '·' | '*' | '–' | '—' | '+' | '◦' | '●' | '∙' | '・' | '‧'
    ) || (matches!(first, '.' | ',' | '_' | '`' | '\'') && spaced)
    {
        let rest = after.trim_start();
        if !rest.is_empty() && rest.chars().next().is_some_and(|c| c.is_alphanumeric()) {
            return Some(rest);
        }
    }
    None
}

/// The page's lines from an engine's segments: read as markdown when the engine answers
/// markdown ([`crate::ports::Ocr::writes_markdown`]), else laid out from their boxes and the
/// page's pixels ([`analyze`]).
pub fn lines(page: &PageImage, segments: Vec<OcrLine>, markdown: bool) -> Vec<Line> {
    if markdown {
        from_markdown(segments)
    } else {
        analyze(page, segments)
    }
}

/// The lines of an engine that answers markdown ([`crate::ports::Ocr::writes_markdown`]), one
/// segment a line, in order: each line's marks read into a [`Kind`], so what is stored is a
/// page of nib's four marks as from any engine. A model may answer more than it was asked
/// (a code fence around the page, `*` or `+` bullets, `##`, `[X]`, `1.`): fences and empty
/// lines are dropped, the other forms read as the mark they mean, numbered lines stay text.
/// There are no boxes; the confidence is the segment's.
pub fn from_markdown(segments: Vec<OcrLine>) -> Vec<Line> {
    segments
        .into_iter()
        .flat_map(|s| {
            let confidence = s.confidence;
            s.text
                .lines()
                .filter_map(|l| markdown_line(l, confidence))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn markdown_line(line: &str, confidence: f32) -> Option<Line> {
    let line = line.trim();
    if line.is_empty() || line.starts_with("```") {
        return None;
    }
    let line_of = |kind: Kind, text: &str| {
        let text = text.trim();
        (!text.is_empty()).then(|| Line {
            kind,
            text: text.to_owned(),
            confidence,
            bbox: OcrBox::default(),
        })
    };
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
        return line_of(Kind::Heading, &line[hashes..]);
    }
    // A list mark, then maybe a checkbox; a checkbox alone is a task too.
    let rest = ["- ", "* ", "+ ", "• "]
        .iter()
        .find_map(|m| line.strip_prefix(m))
        .map(str::trim_start);
    let boxed = rest.unwrap_or(line);
    for (mark, done) in [("[ ]", false), ("[x]", true), ("[X]", true)] {
        if let Some(text) = boxed.strip_prefix(mark)
            && (text.is_empty() || text.starts_with(' '))
        {
            return line_of(Kind::Task { done }, text);
        }
    }
    match rest {
        Some(text) => line_of(Kind::Bullet, text),
        None => line_of(Kind::Text, line),
    }
}

/// The page's lines, in reading order.
pub fn analyze(page: &PageImage, segments: Vec<OcrLine>) -> Vec<Line> {
    let ink = Ink::new(page);
    let debug = std::env::var_os("NIB_OCR_DEBUG").is_some();
    if debug {
        eprintln!("ink threshold {} faint {}", ink.threshold, ink.faint);
    }
    let grouped = group(
        segments
            .into_iter()
            .filter(|s| !s.text.trim().is_empty())
            .collect(),
    );
    let mut heights: Vec<f32> = grouped
        .iter()
        .map(|l| l.iter().map(|s| s.bbox.h).fold(0.0, f32::max))
        .collect();
    heights.sort_by(f32::total_cmp);
    let median_h = heights.get(heights.len() / 2).copied().unwrap_or(40.0);
    let mut out = Vec::new();
    for (index, mut segs) in grouped.into_iter().enumerate() {
        let line_h = segs.iter().map(|s| s.bbox.h).fold(0.0, f32::max);
        let h = line_h.min(median_h * 1.6);
        let cy = segs[0].bbox.center_y();
        let start_x = segs[0].bbox.x;
        let checkbox = find_checkbox(&ink, start_x, cy, h * 0.8);
        if debug {
            eprintln!(
                "line {index}: start {start_x:.0} cy {cy:.0} h {h:.0} box {:?} text {:?}",
                checkbox,
                segs.iter()
                    .map(|s| (s.text.as_str(), s.bbox.x as i32, s.bbox.w as i32))
                    .collect::<Vec<_>>()
            );
        }
        if let Some(cb) = checkbox {
            // Drop what the engine read inside the square (and its tick).
            let box_right = cb.bbox.right() + 0.1 * h;
            segs.retain(|s| s.bbox.right() > box_right || s.bbox.w > 2.0 * h);
            if let Some(first) = segs.first_mut()
                && first.bbox.x < box_right
            {
                let trimmed: String = first
                    .text
                    .trim_start_matches(|c: char| is_box_glyph(c) || c.is_whitespace())
                    .to_owned();
                first.text = trimmed;
            }
            segs.retain(|s| !s.text.trim().is_empty());
        }
        if segs.is_empty() {
            continue;
        }
        let (mut text, mut weight, mut conf) = (String::new(), 0.0f32, 0.0f32);
        let mut bbox = segs[0].bbox;
        for s in &segs {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(s.text.trim());
            let n = s.text.chars().count().max(1) as f32;
            conf += s.confidence * n;
            weight += n;
            bbox = union(&bbox, &s.bbox);
        }
        let confidence = if weight > 0.0 { conf / weight } else { 0.0 };
        let kind = if let Some(cb) = checkbox {
            Kind::Task { done: cb.ticked }
        } else if let Some(rest) = strip_bullet_mark(&text) {
            text = rest.to_owned();
            Kind::Bullet
        } else if find_bullet(&ink, bbox.x, cy, h) {
            Kind::Bullet
        } else if line_h > median_h * 1.3
            || (index == 0 && underlined(&ink, &bbox))
            || underlined(&ink, &bbox) && line_h > median_h * 1.1
        {
            Kind::Heading
        } else {
            Kind::Text
        };
        out.push(Line {
            kind,
            text,
            confidence,
            bbox,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_lines_read_into_the_four_marks() {
        let answer = "```markdown\n# Monday\n\n- [ ] call the bank\n* [X] buy milk\n[x] water \
                      plants\n+ a bullet\n## Later\n1. first\nplain words\n- [ ]\n```";
        let lines = from_markdown(vec![OcrLine {
            text: answer.into(),
            confidence: 1.0,
            bbox: OcrBox::default(),
        }]);
        let got: Vec<String> = lines.iter().map(Line::markdown).collect();
        assert_eq!(
            got,
            [
                "# Monday",
                "- [ ] call the bank",
                "- [x] buy milk",
                "- [x] water plants",
                "- a bullet",
                "# Later",
                "1. first",
                "plain words",
            ]
        );
        // `#tag` is not a heading, `-5` is not a bullet.
        let odd = from_markdown(vec![OcrLine {
            text: "#tag\n-5 degrees".into(),
            confidence: 1.0,
            bbox: OcrBox::default(),
        }]);
        assert!(odd.iter().all(|l| l.kind == Kind::Text), "{odd:?}");
    }

    /// A white page with dark rectangles drawn as outlines or filled.
    struct Canvas(PageImage);

    impl Canvas {
        fn new(w: u32, h: u32) -> Canvas {
            Canvas(PageImage {
                width: w,
                height: h,
                gray: vec![245; (w * h) as usize],
            })
        }

        fn fill(&mut self, x0: u32, y0: u32, x1: u32, y1: u32) {
            self.fill_gray(x0, y0, x1, y1, 40);
        }

        fn fill_gray(&mut self, x0: u32, y0: u32, x1: u32, y1: u32, gray: u8) {
            for y in y0..y1 {
                for x in x0..x1 {
                    self.0.gray[(y * self.0.width + x) as usize] = gray;
                }
            }
        }

        fn square(&mut self, x: u32, y: u32, side: u32, stroke: u32) {
            self.square_gray(x, y, side, stroke, 40);
        }

        fn square_gray(&mut self, x: u32, y: u32, side: u32, stroke: u32, gray: u8) {
            self.fill_gray(x, y, x + side, y + stroke, gray);
            self.fill_gray(x, y + side - stroke, x + side, y + side, gray);
            self.fill_gray(x, y, x + stroke, y + side, gray);
            self.fill_gray(x + side - stroke, y, x + side, y + side, gray);
        }
    }

    fn seg(text: &str, x: f32, y: f32, w: f32, h: f32) -> OcrLine {
        OcrLine {
            text: text.into(),
            confidence: 0.95,
            bbox: OcrBox { x, y, w, h },
        }
    }

    #[test]
    fn squares_left_of_lines_are_tasks_and_ink_inside_ticks_them() {
        let mut c = Canvas::new(800, 400);
        c.square(40, 40, 36, 3); // empty, line at y 40..76
        c.square(40, 140, 36, 3); // ticked with a cross
        for i in 0..28 {
            c.fill(46 + i, 146 + i, 49 + i, 149 + i);
            c.fill(46 + i, 172 - i, 49 + i, 175 - i);
        }
        c.fill(40, 250, 52, 262); // a dot: a bullet
        let lines = analyze(
            &c.0,
            vec![
                seg("口 Buy milk", 36.0, 36.0, 300.0, 44.0),
                seg("Call Dana", 100.0, 136.0, 200.0, 44.0),
                seg("Notes from the call", 80.0, 234.0, 300.0, 44.0),
                seg("plain text line", 40.0, 320.0, 300.0, 44.0),
            ],
        );
        let kinds: Vec<(Kind, &str)> = lines.iter().map(|l| (l.kind, l.text.as_str())).collect();
        assert_eq!(
            kinds,
            vec![
                (Kind::Task { done: false }, "Buy milk"),
                (Kind::Task { done: true }, "Call Dana"),
                (Kind::Bullet, "Notes from the call"),
                (Kind::Text, "plain text line"),
            ]
        );
    }

    #[test]
    fn segments_join_into_lines_in_reading_order() {
        let page = Canvas::new(1000, 300).0;
        let lines = analyze(
            &page,
            vec![
                seg("world", 300.0, 52.0, 100.0, 40.0),
                seg("second", 20.0, 150.0, 120.0, 40.0),
                seg("hello", 20.0, 50.0, 100.0, 40.0),
                seg("- a dash bullet", 20.0, 220.0, 200.0, 40.0),
            ],
        );
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, vec!["hello world", "second", "a dash bullet"]);
        assert_eq!(lines[2].kind, Kind::Bullet);
    }

    #[test]
    fn a_bullet_dot_read_as_a_full_stop_is_structure_not_text() {
        let page = Canvas::new(1000, 400).0;
        let lines = analyze(
            &page,
            vec![
                seg(". Mr. Gaitskell", 20.0, 50.0, 300.0, 40.0),
                seg("_ composed of", 20.0, 150.0, 300.0, 40.0),
                seg(".5 kg of flour", 20.0, 250.0, 300.0, 40.0),
            ],
        );
        let read: Vec<(&str, &Kind)> = lines.iter().map(|l| (l.text.as_str(), &l.kind)).collect();
        assert_eq!(
            read,
            vec![
                ("Mr. Gaitskell", &Kind::Bullet),
                ("composed of", &Kind::Bullet),
                (".5 kg of flour", &Kind::Text),
            ]
        );
    }

    #[test]
    fn a_larger_first_line_is_a_heading_and_markdown_says_so() {
        let page = Canvas::new(1000, 400).0;
        let lines = analyze(
            &page,
            vec![
                seg("Monday", 20.0, 20.0, 200.0, 70.0),
                seg("one", 20.0, 120.0, 100.0, 40.0),
                seg("two", 20.0, 200.0, 100.0, 40.0),
            ],
        );
        assert_eq!(lines[0].kind, Kind::Heading);
        assert_eq!(lines[0].markdown(), "# Monday");
        assert_eq!(lines[1].markdown(), "one");
    }

    #[test]
    fn faint_pencil_boxes_count_as_ink() {
        // Pencil through a blur: the whole page's strokes sit some 60 levels below the paper,
        // far lighter than a fixed share of the paper level.
        let mut c = Canvas::new(800, 300);
        c.square_gray(40, 40, 36, 3, 185);
        c.fill_gray(100, 44, 300, 47, 185); // some writing of the same pencil
        c.fill_gray(100, 70, 300, 73, 185);
        let lines = analyze(&c.0, vec![seg("Buy milk", 100.0, 36.0, 200.0, 44.0)]);
        assert_eq!(lines[0].kind, Kind::Task { done: false });
    }

    #[test]
    fn a_light_tick_inside_a_box_still_ticks_it() {
        let mut c = Canvas::new(800, 300);
        c.square(40, 40, 36, 3);
        // A thin stroke drawn light: well above the ink threshold, clearly below the paper.
        for i in 0..20 {
            c.fill_gray(48 + i, 66 - i, 50 + i, 68 - i, 190);
        }
        let lines = analyze(&c.0, vec![seg("Call Dana", 100.0, 36.0, 200.0, 44.0)]);
        assert_eq!(lines[0].kind, Kind::Task { done: true });
    }

    /// Writing of `height` from x0 on, standing on `baseline`: upright strokes and a bar,
    /// letters' ink without any square in it.
    fn words(c: &mut Canvas, x0: u32, baseline: u32, height: u32) {
        for k in 0..20 {
            let x = x0 + k * 13;
            c.fill(x, baseline - height, x + 3, baseline);
        }
        c.fill(
            x0,
            baseline - height / 2,
            x0 + 260,
            baseline - height / 2 + 3,
        );
    }

    #[test]
    fn a_square_inside_the_strokes_of_letters_is_part_of_the_words() {
        // An outlined capital: the square has letter ink on its left, above and below.
        let mut c = Canvas::new(800, 300);
        c.fill(28, 30, 34, 90);
        c.square(40, 40, 36, 3);
        c.fill(40, 30, 76, 34);
        c.fill(40, 82, 76, 86);
        words(&mut c, 82, 77, 36);
        let lines = analyze(&c.0, vec![seg("Nils is in Bari", 26.0, 30.0, 360.0, 60.0)]);
        assert_eq!(lines[0].kind, Kind::Text);
    }

    #[test]
    fn boxes_drawn_touching_the_box_above_are_still_boxes() {
        // Tall boxes on tightly ruled lines: each box's top edge runs along the bottom edge of
        // the one above, which is a neighbour's box, not letters.
        let mut c = Canvas::new(800, 400);
        let mut segments = Vec::new();
        for k in 0..4u32 {
            let top = 40 + k * 56;
            c.square(40, top, 56, 3);
            words(&mut c, 120, top + 54, 30);
            segments.push(seg("Wash the car", 116.0, top as f32 + 4.0, 300.0, 60.0));
        }
        let lines = analyze(&c.0, segments);
        let kinds: Vec<Kind> = lines.iter().map(|l| l.kind).collect();
        assert_eq!(kinds, vec![Kind::Task { done: false }; 4]);
    }
}
