//! The calendar grid, computed on the server: columns (a professional on a day), rows (slot
//! steps across the opening hours, widened to take in any appointment outside them) and
//! appointments as blocks spanning rows. The template only places them (CSS grid lines).

use chrono::{DateTime, NaiveDate, NaiveTime, Timelike, Utc};
use chrono_tz::Tz;

use crate::store::AgendaEntry;

/// Drawn when no column has opening hours that day.
const DEFAULT_OPEN: (u32, u32) = (9 * 60, 18 * 60);
const DAY_MINUTES: u32 = 24 * 60;

/// What a column shows: one professional's appointments starting on one local day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnKey {
    pub professional_id: i64,
    pub date: NaiveDate,
}

#[derive(Debug, Clone)]
pub struct Column {
    pub key: ColumnKey,
    pub label: String,
    pub sub: String,
    /// Opening ranges that day, in minutes since local midnight.
    pub open: Vec<(u32, u32)>,
}

#[derive(Debug, Clone)]
pub struct Row {
    /// The CSS grid line the row starts on.
    pub line: usize,
    pub label: String,
    /// Whether the row starts on the hour (drawn stronger).
    pub hour: bool,
}

#[derive(Debug, Clone)]
pub struct Block {
    pub id: i64,
    pub professional_id: i64,
    /// The CSS grid column (the first holds the time labels).
    pub column: usize,
    pub row_start: usize,
    pub row_end: usize,
    /// Local start, `YYYY-MM-DDTHH:MM` (for tests and scripts).
    pub local_start: String,
    pub time: String,
    pub customer: String,
    pub service: String,
    pub status: String,
    pub status_label: &'static str,
    pub muted: bool,
}

/// A closed stretch of one column, drawn shaded.
#[derive(Debug, Clone)]
pub struct Closed {
    pub column: usize,
    pub row_start: usize,
    pub row_end: usize,
}

#[derive(Debug, Clone)]
pub struct Grid {
    pub title: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub blocks: Vec<Block>,
    pub closed: Vec<Closed>,
}

impl Grid {
    /// `grid-template-columns` / `-rows` values.
    pub fn template_columns(&self) -> String {
        format!("4.5em repeat({}, minmax(9em, 1fr))", self.columns.len().max(1))
    }

    pub fn template_rows(&self) -> String {
        format!("auto repeat({}, 1.9em)", self.rows.len().max(1))
    }

    /// CSS grid column of the `i`-th column.
    pub fn column_line(i: usize) -> usize {
        i + 2
    }
}

/// The pt-BR label of an appointment status.
pub fn status_label(status: &str) -> &'static str {
    match status {
        "held" => "aguardando sinal",
        "confirmed" => "confirmado",
        "cancelled" => "cancelado",
        "no_show" => "não compareceu",
        _ => "outro",
    }
}

fn minutes(t: NaiveTime) -> u32 {
    t.hour() * 60 + t.minute()
}

fn hhmm(m: u32) -> String {
    format!("{:02}:{:02}", m / 60, m % 60)
}

/// Where `at` falls locally: the day and the minute of that day.
fn local(tz: Tz, at: DateTime<Utc>) -> (NaiveDate, u32) {
    let l = at.with_timezone(&tz).naive_local();
    (l.date(), minutes(l.time()))
}

/// Opening ranges of `hours` as minutes.
pub fn open_minutes(hours: &[(NaiveTime, NaiveTime)]) -> Vec<(u32, u32)> {
    hours.iter().map(|(a, b)| (minutes(*a), if minutes(*b) == 0 { DAY_MINUTES } else { minutes(*b) })).collect()
}

/// Lays `entries` out over `columns`, one row every `step` minutes.
pub fn build(title: String, tz: Tz, step: u32, columns: Vec<Column>, entries: &[AgendaEntry]) -> Grid {
    let step = if step == 0 { 30 } else { step.min(120) };
    // Each entry's column and local span.
    let placed: Vec<(usize, &AgendaEntry, u32, u32)> = entries
        .iter()
        .filter_map(|e| {
            let (day, start) = local(tz, e.starts_at);
            let i = columns.iter().position(|c| c.key.professional_id == e.professional_id && c.key.date == day)?;
            let (end_day, end) = local(tz, e.ends_at);
            let end = if end_day != day { DAY_MINUTES } else { end.max(start + 1) };
            Some((i, e, start, end))
        })
        .collect();
    let mut span: Option<(u32, u32)> = None;
    let widen = |span: &mut Option<(u32, u32)>, (a, b): (u32, u32)| {
        *span = Some(span.map_or((a, b), |(s, e)| (s.min(a), e.max(b))));
    };
    for c in &columns {
        for r in &c.open {
            widen(&mut span, *r);
        }
    }
    for (_, _, s, e) in &placed {
        widen(&mut span, (*s, *e));
    }
    let (first, last) = span.unwrap_or(DEFAULT_OPEN);
    let first = first / step * step;
    let last = last.div_ceil(step) * step;
    let line_of = |m: u32| ((m - first) / step) as usize + 2;
    let end_line_of = |m: u32| ((m - first).div_ceil(step)) as usize + 2;
    let rows = (first..last)
        .step_by(step as usize)
        .map(|m| Row { line: line_of(m), label: hhmm(m), hour: m % 60 == 0 })
        .collect();
    let blocks = placed
        .into_iter()
        .map(|(i, e, s, end)| {
            let row_start = line_of(s);
            let row_end = end_line_of(end).max(row_start + 1);
            let (day, _) = local(tz, e.starts_at);
            Block {
                id: e.id,
                professional_id: e.professional_id,
                column: Grid::column_line(i),
                row_start,
                row_end,
                local_start: format!("{}T{}", day.format("%Y-%m-%d"), hhmm(s)),
                time: format!("{}–{}", hhmm(s), hhmm(end % DAY_MINUTES)),
                customer: e.customer.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| "Cliente".to_owned()),
                service: e.service.clone().unwrap_or_else(|| "Serviço removido".to_owned()),
                status: e.status.clone(),
                status_label: status_label(&e.status),
                muted: !matches!(e.status.as_str(), "held" | "confirmed"),
            }
        })
        .collect();
    let mut closed = Vec::new();
    for (i, c) in columns.iter().enumerate() {
        // Every step not inside an opening range is shaded, in runs.
        let mut run: Option<u32> = None;
        for m in (first..last).step_by(step as usize).chain(std::iter::once(last)) {
            let open = m < last && c.open.iter().any(|(a, b)| *a <= m && m < *b);
            match (run, open || m == last) {
                (None, false) => run = Some(m),
                (Some(s), true) => {
                    closed.push(Closed { column: Grid::column_line(i), row_start: line_of(s), row_end: line_of(m) });
                    run = None;
                }
                _ => {}
            }
        }
    }
    Grid { title, columns, rows, blocks, closed }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn entry(id: i64, professional_id: i64, start: DateTime<Utc>, minutes: i64, status: &str) -> AgendaEntry {
        AgendaEntry {
            id,
            professional_id,
            starts_at: start,
            ends_at: start + chrono::TimeDelta::minutes(minutes),
            status: status.to_owned(),
            customer: Some("Ana".into()),
            service: Some("Corte".into()),
        }
    }

    fn column(professional_id: i64, date: NaiveDate, open: Vec<(u32, u32)>) -> Column {
        Column { key: ColumnKey { professional_id, date }, label: String::new(), sub: String::new(), open }
    }

    #[test]
    fn blocks_land_in_their_professional_column_at_local_time() {
        let tz: Tz = "America/Sao_Paulo".parse().unwrap_or(Tz::UTC);
        let day = NaiveDate::from_ymd_opt(2026, 3, 10).unwrap_or_default();
        let columns = vec![column(1, day, vec![(540, 1080)]), column(2, day, vec![(600, 960)])];
        // 13:00 UTC is 10:00 in São Paulo.
        let at = Utc.with_ymd_and_hms(2026, 3, 10, 13, 0, 0).single().unwrap_or_default();
        let grid = build(String::new(), tz, 30, columns, &[entry(7, 2, at, 40, "confirmed")]);
        assert_eq!(grid.rows.first().map(|r| r.label.as_str()), Some("09:00"));
        assert_eq!(grid.rows.len(), 18);
        let b = &grid.blocks[0];
        assert_eq!((b.column, b.local_start.as_str(), b.time.as_str()), (3, "2026-03-10T10:00", "10:00–10:40"));
        // 09:00 is line 2, so 10:00 is line 4; 40 minutes take two rows.
        assert_eq!((b.row_start, b.row_end), (4, 6));
        // Rafa's column is closed before 10:00 and from 16:00.
        let shaded: Vec<(usize, usize)> =
            grid.closed.iter().filter(|c| c.column == 3).map(|c| (c.row_start, c.row_end)).collect();
        assert_eq!(shaded, vec![(2, 4), (16, 20)]);
    }

    #[test]
    fn an_appointment_outside_hours_widens_the_grid_and_cancelled_is_muted() {
        let tz = Tz::UTC;
        let day = NaiveDate::from_ymd_opt(2026, 3, 10).unwrap_or_default();
        let at = Utc.with_ymd_and_hms(2026, 3, 10, 7, 30, 0).single().unwrap_or_default();
        let grid =
            build(String::new(), tz, 30, vec![column(1, day, vec![(540, 600)])], &[entry(1, 1, at, 20, "cancelled")]);
        assert_eq!(grid.rows.first().map(|r| r.label.as_str()), Some("07:30"));
        assert!(grid.blocks[0].muted);
        // Another day's or another professional's appointment has no column.
        let other = Utc.with_ymd_and_hms(2026, 3, 11, 9, 0, 0).single().unwrap_or_default();
        let grid = build(String::new(), tz, 30, vec![column(1, day, vec![])], &[entry(1, 1, other, 20, "confirmed")]);
        assert!(grid.blocks.is_empty());
        assert_eq!(grid.rows.len(), 18, "a closed day draws the default hours");
    }
}
