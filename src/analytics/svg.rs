//! Server-rendered bar charts as inline SVG: no JavaScript, readable by screen readers (a title,
//! a description naming the total and the busiest bar, a tooltip per bar) and styled by the
//! stylesheet through classes (the content security policy allows no inline styles). Pages show
//! the same numbers as a table next to each chart.

use crate::web::xml::XmlWriter;

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
pub(crate) struct Bar {
    pub(crate) label: String,
    pub(crate) value: i64,
}

/// A bar chart with a title and both axes labelled.
#[derive(Debug, Clone)]
pub(crate) struct BarChart {
    /// Unique on the page: the SVG's title and description are referenced by id.
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) x_axis: String,
    pub(crate) y_axis: String,
    pub(crate) bars: Vec<Bar>,
    /// Label every n-th bar on the x axis (1 = all), so 60 minutes stay legible.
    pub(crate) label_every: usize,
    /// How values are written (ticks, tooltips, the description): counts as they are, money
    /// in cents through the shop's price format.
    pub(crate) format: fn(i64) -> String,
}

/// Values written as plain numbers.
pub(crate) fn plain(n: i64) -> String {
    n.to_string()
}

impl BarChart {
    /// A chart of counts, every bar labelled.
    pub(crate) fn new(
        id: &str,
        title: &str,
        x_axis: &str,
        y_axis: &str,
        bars: Vec<Bar>,
    ) -> BarChart {
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
    pub(crate) fn scale_max(&self) -> i64 {
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
    pub(crate) fn bar_height(&self, value: i64) -> f64 {
        let h = value.max(0) as f64 / self.scale_max() as f64 * PLOT_HEIGHT;
        (h * 10.0).round() / 10.0
    }

    pub(crate) fn total(&self) -> i64 {
        self.bars.iter().map(|b| b.value).sum()
    }

    /// What a screen reader announces after the title.
    pub(crate) fn description(&self) -> String {
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

    /// The chart as an `<svg>` element, written through [`XmlWriter`] (escaped by
    /// construction: safe to embed in a page as is).
    pub(crate) fn render(&self) -> String {
        let plot_width = WIDTH - LEFT - RIGHT;
        let bottom = TOP + PLOT_HEIGHT;
        let slot = plot_width / self.bars.len().max(1) as f64;
        let title_id = format!("{}-title", self.id);
        let desc_id = format!("{}-desc", self.id);
        let mut svg = XmlWriter::fragment();
        svg.element(
            "svg",
            &[
                ("class", "bar-chart"),
                ("role", "img"),
                ("viewBox", format!("0 0 {WIDTH} {HEIGHT}").as_str()),
                ("aria-labelledby", format!("{title_id} {desc_id}").as_str()),
                ("xmlns", "http://www.w3.org/2000/svg"),
            ],
            |svg| {
                svg.text_element("title", &[("id", title_id.as_str())], &self.title);
                svg.text_element("desc", &[("id", desc_id.as_str())], &self.description());
                // Gridlines and value labels at zero, half and the top of the scale.
                let max = self.scale_max();
                let ticks: Vec<i64> = if max % 2 == 0 {
                    vec![0, max / 2, max]
                } else {
                    vec![0, max]
                };
                for tick in ticks {
                    let y = bottom - self.bar_height(tick);
                    line(svg, "grid", LEFT, y, WIDTH - RIGHT, y);
                    label(
                        svg,
                        "tick y-tick",
                        (LEFT - 6.0, y + 4.0),
                        "end",
                        &[],
                        &(self.format)(tick),
                    );
                }
                for (i, bar) in self.bars.iter().enumerate() {
                    let x = LEFT + slot * i as f64;
                    let height = self.bar_height(bar.value);
                    svg.element(
                        "rect",
                        &[
                            ("class", "bar"),
                            ("x", one_decimal(x + slot * 0.1).as_str()),
                            ("y", one_decimal(bottom - height).as_str()),
                            ("width", one_decimal(slot * 0.8).as_str()),
                            ("height", one_decimal(height).as_str()),
                            ("data-label", bar.label.as_str()),
                            ("data-value", bar.value.to_string().as_str()),
                        ],
                        |svg| {
                            svg.text_element(
                                "title",
                                &[],
                                &format!("{}: {}", bar.label, (self.format)(bar.value)),
                            )
                        },
                    );
                    if i % self.label_every.max(1) == 0 {
                        label(
                            svg,
                            "tick x-tick",
                            (x + slot / 2.0, bottom + 14.0),
                            "middle",
                            &[],
                            &bar.label,
                        );
                    }
                }
                line(svg, "axis", LEFT, bottom, WIDTH - RIGHT, bottom);
                line(svg, "axis", LEFT, TOP, LEFT, bottom);
                label(
                    svg,
                    "axis-label x-axis-label",
                    (LEFT + plot_width / 2.0, HEIGHT - 8.0),
                    "middle",
                    &[],
                    &self.x_axis,
                );
                label(
                    svg,
                    "axis-label y-axis-label",
                    (-(TOP + PLOT_HEIGHT / 2.0), 14.0),
                    "middle",
                    &[("transform", "rotate(-90)")],
                    &self.y_axis,
                );
            },
        );
        svg.finish()
    }
}

/// A coordinate with one decimal (`12.0`).
fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

/// A `<line>` of `class` from (x1, y1) to (x2, y2).
fn line(svg: &mut XmlWriter, class: &str, x1: f64, y1: f64, x2: f64, y2: f64) {
    svg.empty_element(
        "line",
        &[
            ("class", class),
            ("x1", one_decimal(x1).as_str()),
            ("y1", one_decimal(y1).as_str()),
            ("x2", one_decimal(x2).as_str()),
            ("y2", one_decimal(y2).as_str()),
        ],
    );
}

/// A `<text>` of `class` at `(x, y)`, anchored at `anchor`.
fn label(
    svg: &mut XmlWriter,
    class: &str,
    (x, y): (f64, f64),
    anchor: &str,
    extra: &[(&str, &str)],
    text: &str,
) {
    let (x, y) = (one_decimal(x), one_decimal(y));
    let mut attributes = vec![("class", class), ("x", x.as_str()), ("y", y.as_str())];
    attributes.push(("text-anchor", anchor));
    attributes.extend_from_slice(extra);
    svg.text_element("text", &attributes, text);
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
    fn hostile_labels_come_back_as_text_from_a_strict_xml_parser() {
        use quick_xml::events::Event;
        let hostile = "</title><script>alert(1)</script> & \"x\" 'y' ]]>\u{1}";
        let mut c = chart(&[3, 1]);
        c.title = hostile.to_string();
        c.bars[0].label = hostile.to_string();
        let svg = c.render();
        let mut reader = quick_xml::Reader::from_str(&svg);
        reader.config_mut().check_end_names = true;
        let (mut texts, mut labels, mut text, mut elements) =
            (Vec::new(), Vec::new(), String::new(), 0);
        loop {
            match reader.read_event().expect("well-formed XML") {
                Event::Text(t) => text.push_str(&t.xml10_content()),
                Event::GeneralRef(r) => {
                    let name: &str = &r;
                    text.push_str(quick_xml::escape::resolve_xml_entity(name).expect("defined"));
                }
                Event::Eof => break,
                event => {
                    if let Event::Start(e) | Event::Empty(e) = &event {
                        elements += 1;
                        if let Some(label) = e.try_get_attribute("data-label").expect("attribute") {
                            labels.push(
                                label
                                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                    .expect("escaped")
                                    .into_owned(),
                            );
                        }
                    }
                    if !text.is_empty() {
                        texts.push(std::mem::take(&mut text));
                    }
                }
            }
        }
        let clean = "</title><script>alert(1)</script> & \"x\" 'y' ]]>";
        assert_eq!(texts[0], clean, "{svg}");
        assert!(texts.contains(&format!("{clean}: 3")), "{texts:?}");
        assert_eq!(labels, [clean, "1"]);
        assert!(!svg.contains("<script"), "{svg}");
        // svg, title, desc, 2 × (grid line, tick), 2 × (rect, its title, x label), 2 axes, 2 labels
        assert_eq!(elements, 3 + 4 + 6 + 4, "{svg}");
    }

    #[test]
    fn an_empty_chart_says_so() {
        let c = chart(&[0; 24]);
        assert!(c.render().contains("No views in this period"));
        assert_eq!(c.render().matches("<rect").count(), 24);
    }
}
