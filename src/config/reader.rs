//! Reads variables and collects every problem, so an operator fixes them in one go.

use std::collections::HashMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

pub(super) struct Reader<'a> {
    pub(super) vars: &'a HashMap<String, String>,
    pub(super) problems: Vec<String>,
}

impl Reader<'_> {
    pub(super) fn string(&self, name: &str) -> Option<String> {
        self.vars.get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    pub(super) fn parsed<T: FromStr>(&mut self, name: &str, default: T, what: &str) -> T
    where
        T::Err: fmt::Display,
    {
        match self.string(name) {
            None => default,
            Some(raw) => match raw.parse() {
                Ok(v) => v,
                Err(e) => {
                    self.problems.push(format!("{name}={raw:?} is not {what}: {e}"));
                    default
                }
            },
        }
    }

    /// A whole number within `bounds` (the default must be within them too).
    pub(super) fn bounded(&mut self, name: &str, default: u64, bounds: RangeInclusive<u64>, unit: &str) -> u64 {
        debug_assert!(bounds.contains(&default), "default of {name} out of its bounds");
        let v = self.parsed(name, default, &format!("a whole number of {unit}"));
        if !bounds.contains(&v) {
            self.problems.push(format!(
                "{name}={v} is out of range: it must be between {} and {} {unit}",
                bounds.start(),
                bounds.end()
            ));
            return default;
        }
        v
    }

    pub(super) fn flag(&mut self, name: &str) -> bool {
        match self.string(name).as_deref() {
            None | Some("0" | "false") => false,
            Some("1" | "true") => true,
            Some(other) => {
                self.problems.push(format!("{name}={other:?} must be 1 or 0 (true or false)"));
                false
            }
        }
    }

    /// Records a problem when two settings contradict each other.
    pub(super) fn require(&mut self, holds: bool, problem: &str) {
        if !holds {
            self.problems.push(problem.to_owned());
        }
    }
}
