//! The usage chart, drawn on the server as SVG: one stacked bar per bucket, a series per
//! modality. Geometry only; the template writes the elements and the stylesheet colours them
//! by class (no inline style).

use moderation_shared::usage::Point;

/// The drawing's size in its own units (it scales to the page).
pub const WIDTH: f64 = 720.0;
/// Its height.
pub const HEIGHT: f64 = 240.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 26.0;

/// The series, bottom to top, with their CSS classes and legend names.
pub const SERIES: [(&str, &str); 4] = [
    ("text", "Text"),
    ("image", "Image"),
    ("video", "Video"),
    ("audio", "Audio"),
];

/// One rectangle of a bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// The series' class.
    pub class: &'static str,
    /// Left edge.
    pub x: String,
    /// Top edge.
    pub y: String,
    /// Width.
    pub width: String,
    /// Height.
    pub height: String,
    /// The tooltip: bucket, series and count.
    pub title: String,
}

/// A label on an axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    /// Its anchor's x.
    pub x: String,
    /// Its baseline's y.
    pub y: String,
    /// The text.
    pub text: String,
}

/// Everything the template draws.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// The bars' rectangles.
    pub segments: Vec<Segment>,
    /// Bucket labels under the plot.
    pub x_labels: Vec<Label>,
    /// Count labels left of the plot.
    pub y_labels: Vec<Label>,
    /// The jobs of each series over the whole period, in [`SERIES`] order.
    pub totals: [i64; 4],
}

/// The counts of one point in [`SERIES`] order (legacy `pre`/`post` jobs are text).
fn counts(point: &Point) -> [i64; 4] {
    [
        point.prompt + point.pre + point.post,
        point.image,
        point.video,
        point.audio,
    ]
}

fn n(v: f64) -> String {
    format!("{v:.1}")
}

/// Lays `points` out; `label` names a bucket by its start.
pub fn draw(points: &[Point], label: impl Fn(&Point) -> String) -> Chart {
    let mut chart = Chart::default();
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let max = points
        .iter()
        .map(|p| counts(p).iter().sum::<i64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let slot = plot_width / points.len().max(1) as f64;
    let bar = (slot * 0.8).max(1.0);
    for (i, point) in points.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
        let mut base = TOP + plot_height;
        for (count, (class, name)) in counts(point).into_iter().zip(SERIES) {
            if count == 0 {
                continue;
            }
            let height = plot_height * count as f64 / max as f64;
            base -= height;
            chart.segments.push(Segment {
                class,
                x: n(x),
                y: n(base),
                width: n(bar),
                height: n(height),
                title: format!("{}: {count} {name}", label(point)),
            });
        }
        for (total, count) in chart.totals.iter_mut().zip(counts(point)) {
            *total += count;
        }
    }
    let last = points.len().saturating_sub(1);
    let mut marks = vec![0, last / 2, last];
    marks.dedup();
    for i in marks {
        if let Some(point) = points.get(i) {
            chart.x_labels.push(Label {
                x: n(LEFT + slot * i as f64 + slot / 2.0),
                y: n(HEIGHT - 8.0),
                text: label(point),
            });
        }
    }
    for (value, y) in [(0, TOP + plot_height), (max, TOP + 10.0)] {
        chart.y_labels.push(Label {
            x: n(LEFT - 6.0),
            y: n(y),
            text: value.to_string(),
        });
    }
    chart
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn point(prompt: i64, image: i64) -> Point {
        Point {
            ts: datetime!(2026-11-22 0:00 UTC),
            pre: 0,
            post: 0,
            prompt,
            image,
            video: 0,
            audio: 0,
        }
    }

    #[test]
    fn bars_stack_their_series_up_to_the_tallest_bucket() {
        let chart = draw(&[point(2, 2), point(1, 0)], |_| "b".to_owned());

        assert_eq!(chart.segments.len(), 3);
        assert_eq!(chart.totals, [3, 2, 0, 0]);
        let text = &chart.segments[0];
        let image = &chart.segments[1];
        assert_eq!((text.class, image.class), ("text", "image"));
        // The tallest bar fills the plot: 240 - 10 - 26 = 204 units, half each.
        assert_eq!(
            (text.height.as_str(), image.height.as_str()),
            ("102.0", "102.0")
        );
        assert_eq!(image.y, "10.0");
        assert_eq!(chart.y_labels[1].text, "4");
    }

    #[test]
    fn an_empty_series_draws_no_bars() {
        let points: Vec<Point> = (0..7).map(|_| point(0, 0)).collect();
        let chart = draw(&points, |_| "b".to_owned());
        assert!(chart.segments.is_empty());
        assert_eq!(chart.x_labels.len(), 3);
    }
}
