//! Server-rendered bar charts as inline SVG: no JavaScript, readable by screen readers (a title,
//! a description naming the total and the busiest bar, a tooltip per bar) and styled by the
//! stylesheet through classes (the content security policy allows no inline styles). Pages show
//! the same numbers as a table next to each chart.

use std::fmt::Write;

/// Size of the drawing, in SVG user units (the stylesheet scales it to the page).
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 230.0;
/// The plot area inside the axes.
const LEFT: f64 = 52.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 12.0;
/// Height of the plot area: a bar as tall as the scale's maximum is this tall.
pub const PLOT_HEIGHT: f64 = 170.0;

/// One bar: its axis label and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub label: String,
    pub value: i64,
}

/// A bar chart with a title and both axes labelled.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Unique on the page: the SVG's title and description are referenced by id.
    pub id: String,
    pub title: String,
    pub x_axis: String,
    pub y_axis: String,
    pub bars: Vec<Bar>,
    /// Label every n-th bar on the x axis (1 = all), so 60 minutes stay legible.
    pub label_every: usize,
    /// How values are written (ticks, tooltips, the description): counts as they are, money
    /// in cents through the shop's price format.
    pub format: fn(i64) -> String,
}

/// Values written as plain numbers.
pub fn plain(n: i64) -> String {
    n.to_string()
}

impl BarChart {
    /// A chart of counts, every bar labelled.
    pub fn new(id: &str, title: &str, x_axis: &str, y_axis: &str, bars: Vec<Bar>) -> BarChart {
        BarChart {
            id: id.to_string(),
            title: title.to_string(),
            x_axis: x_axis.to_string(),
            y_axis: y_axis.to_string(),
            bars,
            label_every: 1,
            format: plain,
        }
    }

    /// The top of the value axis: the smallest 1, 2 or 5 × 10ⁿ at or above the largest value
    /// (1 for a chart of zeros, which then draws no bars).
    pub fn scale_max(&self) -> i64 {
        let max = self.bars.iter().map(|b| b.value).max().unwrap_or(0).max(1);
        let mut step: i64 = 1;
        loop {
            for m in [1, 2, 5] {
                let candidate = step.saturating_mul(m);
                if candidate >= max {
                    return candidate;
                }
            }
            if step > i64::MAX / 10 {
                return max;
            }
            step *= 10;
        }
    }

    /// The height a bar of `value` is drawn with.
    pub fn bar_height(&self, value: i64) -> f64 {
        let h = value.max(0) as f64 / self.scale_max() as f64 * PLOT_HEIGHT;
        (h * 10.0).round() / 10.0
    }

    pub fn total(&self) -> i64 {
        self.bars.iter().map(|b| b.value).sum()
    }

    /// What a screen reader announces after the title.
    pub fn description(&self) -> String {
        let total = self.total();
        if total == 0 {
            return format!(
                "No {} in this period: every bar is zero.",
                self.y_axis.to_lowercase()
            );
        }
        let busiest = self
            .bars
            .iter()
            .max_by_key(|b| b.value)
            .map(|b| {
                format!(
                    "; the highest bar is {} with {}",
                    b.label,
                    (self.format)(b.value)
                )
            })
            .unwrap_or_default();
        format!(
            "{} bars, {} {} in all{busiest}.",
            self.bars.len(),
            (self.format)(total),
            self.y_axis.to_lowercase()
        )
    }

    /// The chart as an `<svg>` element (escaped: safe to embed in a page as is).
    pub fn render(&self) -> String {
        let plot_width = WIDTH - LEFT - RIGHT;
        let bottom = TOP + PLOT_HEIGHT;
        let slot = plot_width / self.bars.len().max(1) as f64;
        let id = escape(&self.id);
        let mut svg = String::with_capacity(4096 + self.bars.len() * 200);
        let _ = write!(
            svg,
            r#"<svg class="bar-chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg"><title id="{id}-title">{}</title><desc id="{id}-desc">{}</desc>"#,
            escape(&self.title),
            escape(&self.description()),
        );
        // Gridlines and value labels at zero, half and the top of the scale.
        let max = self.scale_max();
        let ticks: Vec<i64> = if max % 2 == 0 {
            vec![0, max / 2, max]
        } else {
            vec![0, max]
        };
        for tick in ticks {
            let y = bottom - self.bar_height(tick);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text class="tick y-tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                escape(&(self.format)(tick)),
            );
        }
        for (i, bar) in self.bars.iter().enumerate() {
            let x = LEFT + slot * i as f64;
            let height = self.bar_height(bar.value);
            let _ = write!(
                svg,
                r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{height:.1}" data-label="{}" data-value="{}"><title>{}: {}</title></rect>"#,
                x + slot * 0.1,
                bottom - height,
                slot * 0.8,
                escape(&bar.label),
                bar.value,
                escape(&bar.label),
                escape(&(self.format)(bar.value)),
            );
            if i % self.label_every.max(1) == 0 {
                let _ = write!(
                    svg,
                    r#"<text class="tick x-tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    x + slot / 2.0,
                    bottom + 14.0,
                    escape(&bar.label),
                );
            }
        }
        let _ = write!(
            svg,
            r#"<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{:.1}" y2="{bottom}"/><line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/><text class="axis-label x-axis-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="axis-label y-axis-label" x="{:.1}" y="14" text-anchor="middle" transform="rotate(-90)">{}</text></svg>"#,
            WIDTH - RIGHT,
            LEFT + plot_width / 2.0,
            HEIGHT - 8.0,
            escape(&self.x_axis),
            -(TOP + PLOT_HEIGHT / 2.0),
            escape(&self.y_axis),
        );
        svg
    }
}

/// Text safe inside an SVG element or a quoted attribute.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(values: &[i64]) -> BarChart {
        let bars = values
            .iter()
            .enumerate()
            .map(|(i, v)| Bar {
                label: i.to_string(),
                value: *v,
            })
            .collect();
        BarChart::new("c", "Views <by> hour", "Hour", "Views", bars)
    }

    #[test]
    fn the_scale_rounds_up_to_one_two_or_five() {
        assert_eq!(chart(&[0, 0]).scale_max(), 1);
        assert_eq!(chart(&[3]).scale_max(), 5);
        assert_eq!(chart(&[7, 2]).scale_max(), 10);
        assert_eq!(chart(&[101]).scale_max(), 200);
        assert_eq!(chart(&[i64::MAX]).scale_max(), i64::MAX);
    }

    #[test]
    fn bars_are_as_tall_as_their_share_of_the_scale() {
        let c = chart(&[10, 5, 0]);
        assert_eq!(c.bar_height(10), PLOT_HEIGHT);
        assert_eq!(c.bar_height(5), PLOT_HEIGHT / 2.0);
        let svg = c.render();
        assert!(
            svg.contains(r#"height="170.0" data-label="0" data-value="10""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"height="85.0" data-label="1" data-value="5""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"height="0.0" data-label="2" data-value="0""#),
            "{svg}"
        );
        assert!(svg.contains("<title id=\"c-title\">Views &lt;by&gt; hour</title>"));
        assert!(svg.contains("15 views in all; the highest bar is 0 with 10."));
    }

    #[test]
    fn an_empty_chart_says_so() {
        let c = chart(&[0; 24]);
        assert!(c.render().contains("No views in this period"));
        assert_eq!(c.render().matches("<rect").count(), 24);
    }
}
