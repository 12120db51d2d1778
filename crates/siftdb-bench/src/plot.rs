//! Pictures of a run: SVG charts drawn with `plotters`' SVG backend.
//!
//! Owns: [`run_svg`] — ops/s per phase and the p50/p99 latencies of every
//! engine of a run, side by side — and [`fp_curve_svg`], the measured
//! false-positive rate of siftdb's filter against the blocked-Bloom and the
//! standard-Bloom theory; [`write_svg`] puts either in a file.
//! Must never: draw a figure for a phase that failed its checks (it is
//! marked as failed instead), or compute a figure itself — every number
//! comes from a [`PhaseReport`] or an [`FpPoint`].
//!
//! Text is written as SVG `<text>` for the viewer to render (no font is
//! loaded or embedded), which keeps the files small.

use std::path::Path;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::report::PhaseReport;

/// Engine colours, in the order engines appear (siftdb first in a run).
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Size of a run's picture: two panels side by side.
const RUN_SIZE: (u32, u32) = (1100, 430);
/// Size of the false-positive curve.
const FP_SIZE: (u32, u32) = (760, 460);
/// Share of a phase's slot its bars fill (the rest separates phases).
const GROUP_WIDTH: f64 = 0.8;

fn colour(index: usize) -> RGBColor {
    PALETTE
        .get(index % PALETTE.len())
        .copied()
        .unwrap_or(RGBColor(0, 0, 0))
}

fn drawing_error<E: std::fmt::Display>(e: E) -> String {
    format!("cannot draw the plot: {e}")
}

/// Writes `svg` to `path`.
pub fn write_svg(path: &Path, svg: &str) -> Result<(), String> {
    std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The decades `[10^a, 10^b]` around every value, for a log axis, with
/// `headroom` times the largest value still below the top (room for a legend).
fn log_bounds(values: impl Iterator<Item = f64>, headroom: f64) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64
        .powf((hi * headroom.max(1.0)).log10().ceil())
        .max(lo * 10.0);
    (lo, hi)
}

/// One bar slot: where engine `e` of `engines` draws in phase slot `i`.
fn slot(i: usize, e: usize, engines: usize) -> (f64, f64) {
    let width = GROUP_WIDTH / engines.max(1) as f64;
    let left = i as f64 + (1.0 - GROUP_WIDTH) / 2.0 + e as f64 * width;
    (left + width * 0.08, left + width * 0.92)
}

/// The phases of a run in the order they ran (the first engine's order,
/// then any phase only a later engine ran).
fn phases_of(runs: &[Vec<PhaseReport>]) -> Vec<&'static str> {
    let mut phases = Vec::new();
    for report in runs.iter().flatten() {
        let name = report.phase.name();
        if !phases.contains(&name) {
            phases.push(name);
        }
    }
    phases
}

/// The engine name of a run: its first report's.
fn engine_of(run: &[PhaseReport]) -> &str {
    run.first().map_or("?", |r| r.engine.as_str())
}

/// A run's picture as SVG text: on the left ops/s per phase, on the right
/// the p50 latency per phase as a bar with a whisker up to p99 (both log
/// scales); one colour per engine, engines side by side within a phase.
/// `runs[e]` holds engine `e`'s reports. A phase that failed its checks
/// shows `failed` instead of a bar.
pub fn run_svg(title: &str, runs: &[Vec<PhaseReport>]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, RUN_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let root = root
            .titled(title, ("sans-serif", 18))
            .map_err(drawing_error)?;
        let (left, right) = root.split_horizontally(RUN_SIZE.0 / 2);
        let phases = phases_of(runs);
        draw_run_panel(&left, runs, &phases, Panel::Throughput)?;
        draw_run_panel(&right, runs, &phases, Panel::Latency)?;
        root.present().map_err(drawing_error)?;
    }
    Ok(svg)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Panel {
    Throughput,
    Latency,
}

fn draw_run_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    runs: &[Vec<PhaseReport>],
    phases: &[&'static str],
    panel: Panel,
) -> Result<(), String> {
    let values = runs.iter().flatten().flat_map(|r| match panel {
        Panel::Throughput => vec![r.ops_per_sec().unwrap_or(0.0)],
        Panel::Latency => r
            .latency
            .filter(|_| r.passed())
            .map_or_else(Vec::new, |l| vec![l.p50_us(), l.p99_us()]),
    });
    // The legend sits in the throughput panel's top right corner.
    let headroom = if panel == Panel::Throughput { 4.0 } else { 1.0 };
    let (lo, hi) = log_bounds(values, headroom);
    let (caption, y_desc) = match panel {
        Panel::Throughput => ("throughput (higher is better)", "ops/s"),
        Panel::Latency => (
            "latency: bar p50, whisker p99 (lower is better)",
            "µs per op",
        ),
    };
    let count = phases.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..count as f64, (lo..hi).log_scale())
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .light_line_style(TRANSPARENT)
        .y_label_formatter(&|y: &f64| short_number(*y))
        .y_desc(y_desc)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(drawing_error)?;
    // Phase names under the middle of their slots, placed in pixels: the
    // axis's own ticks would fall on round numbers, not on the slots.
    let label_style = ("sans-serif", 12)
        .into_font()
        .into_text_style(area)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, phase) in phases.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, lo));
        let (x0, y0) = area.get_base_pixel();
        area.draw_text(phase, &label_style, (x - x0, y - y0 + 8))
            .map_err(drawing_error)?;
    }

    let engines = runs.len();
    for (e, run) in runs.iter().enumerate() {
        let style = colour(e).filled();
        let mut bars = Vec::new();
        let mut whiskers = Vec::new();
        let mut failed = Vec::new();
        for report in run {
            let Some(i) = phases.iter().position(|p| *p == report.phase.name()) else {
                continue;
            };
            let (x0, x1) = slot(i, e, engines);
            let top = match panel {
                Panel::Throughput => report.ops_per_sec(),
                Panel::Latency => report
                    .latency
                    .filter(|_| report.passed())
                    .map(|l| l.p50_us()),
            };
            let Some(top) = top.filter(|v| *v > 0.0) else {
                failed.push((x0, x1));
                continue;
            };
            bars.push(Rectangle::new([(x0, lo), (x1, top)], style));
            if panel == Panel::Latency {
                if let Some(p99) = report.latency.map(|l| l.p99_us()) {
                    let mid = (x0 + x1) / 2.0;
                    let cap = (x1 - x0) / 4.0;
                    whiskers.push(PathElement::new(vec![(mid, top), (mid, p99)], BLACK));
                    whiskers.push(PathElement::new(
                        vec![(mid - cap, p99), (mid + cap, p99)],
                        BLACK,
                    ));
                }
            }
        }
        let name = engine_of(run).to_string();
        let drawn = chart.draw_series(bars).map_err(drawing_error)?;
        if panel == Panel::Throughput {
            drawn.label(name).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour(e).filled())
            });
        }
        chart.draw_series(whiskers).map_err(drawing_error)?;
        chart
            .draw_series(failed.into_iter().map(|(x0, _)| {
                Text::new(
                    "failed",
                    (x0, lo * 1.3),
                    ("sans-serif", 11).into_font().color(&RED),
                )
            }))
            .map_err(drawing_error)?;
    }
    if panel == Panel::Throughput {
        draw_legend(&mut chart)?;
    }
    Ok(())
}

/// The series' names and swatches in a box in the chart's top right corner.
fn draw_legend<'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(drawing_error)
}

/// `1200000` as `1.2M`, `0.5` as `0.5`: axis labels that stay short.
fn short_number(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = if scaled.fract().abs() < 1e-9 {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 0.01 {
        format!("{scaled:.2}")
    } else {
        format!("{scaled:.0e}")
    };
    let text = if text.contains('.') && !text.contains('e') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{suffix}")
}

/// One bits-per-key setting of the false-positive curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FpPoint {
    /// Bits per key the filter was sized with.
    pub bits_per_key: f64,
    /// Bits per key it actually holds (whole cache lines).
    pub actual_bits_per_key: f64,
    /// Probes per key the filter chose.
    pub probes: u32,
    /// Absent keys asked.
    pub queries: u64,
    /// Of them, answered "maybe present".
    pub false_positives: u64,
    /// The blocked-Bloom rate for the same bits per key and probes.
    pub blocked_theory: f64,
    /// The standard-Bloom rate for the same bits, keys and probes.
    pub standard_theory: f64,
}

impl FpPoint {
    /// The measured false-positive rate.
    pub fn measured(&self) -> f64 {
        if self.queries == 0 {
            return 0.0;
        }
        self.false_positives as f64 / self.queries as f64
    }
}

/// The false-positive curve as SVG text: the measured rate of siftdb's
/// filter per bits per key (points joined by a line), the blocked-Bloom
/// theory (solid) and the standard-Bloom theory (dashed), log scale.
pub fn fp_curve_svg(title: &str, points: &[FpPoint]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, FP_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let rates = points
            .iter()
            .flat_map(|p| [p.measured(), p.blocked_theory, p.standard_theory]);
        let (lo, hi) = log_bounds(rates, 1.0);
        let (x_lo, x_hi) = points.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
            (a.min(p.bits_per_key), b.max(p.bits_per_key))
        });
        let (x_lo, x_hi) = if x_lo < x_hi {
            (x_lo.floor(), x_hi.ceil())
        } else {
            (0.0, 1.0)
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, (lo..hi).log_scale())
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.12))
            .x_desc("bits per key")
            .y_desc("false-positive rate")
            .x_label_formatter(&|x: &f64| short_number(*x))
            .y_label_formatter(&|y: &f64| format!("{y:.0e}"))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(drawing_error)?;

        let measured: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.false_positives > 0)
            .map(|p| (p.bits_per_key, p.measured()))
            .collect();
        let blocked = points.iter().map(|p| (p.bits_per_key, p.blocked_theory));
        let standard = points.iter().map(|p| (p.bits_per_key, p.standard_theory));
        let (c_measured, c_blocked, c_standard) = (colour(0), colour(1), colour(2));
        chart
            .draw_series(LineSeries::new(blocked, c_blocked.stroke_width(2)))
            .map_err(drawing_error)?
            .label("blocked Bloom theory (512-bit lines)")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], c_blocked.stroke_width(2))
            });
        chart
            .draw_series(DashedLineSeries::new(
                standard,
                6,
                4,
                c_standard.stroke_width(2),
            ))
            .map_err(drawing_error)?
            .label("standard Bloom theory")
            .legend(move |(x, y)| {
                DashedPathElement::new(vec![(x, y), (x + 16, y)], 4, 3, c_standard.stroke_width(2))
            });
        chart
            .draw_series(LineSeries::new(measured.iter().copied(), c_measured))
            .map_err(drawing_error)?;
        chart
            .draw_series(
                measured
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, c_measured.filled())),
            )
            .map_err(drawing_error)?
            .label("siftdb filter, measured")
            .legend(move |(x, y)| Circle::new((x + 8, y), 3, c_measured.filled()));
        draw_legend(&mut chart)?;
        root.present().map_err(drawing_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_bounds_cover_every_value_in_whole_decades() {
        assert_eq!(log_bounds([3.0, 250.0].into_iter(), 1.0), (1.0, 1000.0));
        assert_eq!(log_bounds([0.004, 0.02].into_iter(), 1.0), (0.001, 0.1));
        assert_eq!(log_bounds([100.0].into_iter(), 1.0), (100.0, 1000.0));
        assert_eq!(log_bounds([0.0, f64::NAN].into_iter(), 1.0), (1.0, 10.0));
        assert_eq!(log_bounds([3.0, 250.0].into_iter(), 4.0), (1.0, 1000.0));
        assert_eq!(log_bounds([3.0, 900.0].into_iter(), 4.0), (1.0, 10_000.0));
    }

    #[test]
    fn slots_of_a_phase_do_not_overlap_and_stay_inside_it() {
        for engines in 1..=4 {
            let mut last = 2.0;
            for e in 0..engines {
                let (a, b) = slot(2, e, engines);
                assert!(a >= last && b > a && b <= 3.0, "{engines} {e}: {a} {b}");
                last = b;
            }
        }
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short_number(1_200_000.0), "1.2M");
        assert_eq!(short_number(1000.0), "1k");
        assert_eq!(short_number(10.0), "10");
        assert_eq!(short_number(0.5), "0.5");
        assert_eq!(short_number(0.001), "1e-3");
        assert_eq!(short_number(3e9), "3G");
    }
}
