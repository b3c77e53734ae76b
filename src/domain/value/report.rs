//! What a run's value rules could not make of its pages, field by field:
//! values that did not parse, items left out for a required field without a
//! value. Each is a note of the run's data health: the run completes
//! `degraded`, its reason naming the field and a value that failed.

use std::collections::BTreeMap;

use super::Typed;

/// One field's failures in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldTally {
    /// Values that did not parse.
    pub unparsed: u64,
    /// The first of them, as its error says.
    pub first: Option<String>,
    /// Items left out because this required field had no value.
    pub left_out: u64,
}

/// The value failures of a run (or of one page), by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueReport {
    pub fields: BTreeMap<String, FieldTally>,
}

impl ValueReport {
    /// Counts what applying `field`'s rules gave.
    pub fn record(&mut self, field: &str, typed: &Typed) {
        if typed.unparsed == 0 && !typed.missing_required {
            return;
        }
        let tally = self.fields.entry(field.to_owned()).or_default();
        tally.unparsed += u64::from(typed.unparsed);
        if tally.first.is_none() {
            tally.first = typed.error.as_ref().map(ToString::to_string);
        }
        tally.left_out += u64::from(typed.missing_required);
    }

    /// Adds another page's report.
    pub fn merge(&mut self, other: ValueReport) {
        for (field, more) in other.fields {
            let tally = self.fields.entry(field).or_default();
            tally.unparsed += more.unparsed;
            tally.left_out += more.left_out;
            if tally.first.is_none() {
                tally.first = more.first;
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Each failure, as a person reads it (the run's health reason).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for (field, tally) in &self.fields {
            if tally.unparsed > 0 {
                let first = tally
                    .first
                    .as_deref()
                    .map(|f| format!(" (first: {f})"))
                    .unwrap_or_default();
                notes.push(format!(
                    "{field}: {} value(s) did not parse{first}",
                    tally.unparsed
                ));
            }
            if tally.left_out > 0 {
                notes.push(format!(
                    "{field}: {} item(s) left out, required and without a value",
                    tally.left_out
                ));
            }
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::{super::ValueError, *};

    fn typed(unparsed: u32, error: Option<ValueError>, missing_required: bool) -> Typed {
        Typed {
            value: Value::Null,
            currency: None,
            unparsed,
            error,
            missing_required,
        }
    }

    #[test]
    fn failures_are_counted_by_field_with_the_first_named() {
        let mut page = ValueReport::default();
        page.record("price", &typed(0, None, false));
        assert!(page.is_empty(), "a value that parsed is no failure");
        let call = ValueError::NotANumber("Call us".into(), String::new());
        page.record("price", &typed(1, Some(call), false));
        let mut run = ValueReport::default();
        run.merge(page);
        let mut next = ValueReport::default();
        let sold = ValueError::NotANumber("Sold out".into(), String::new());
        next.record("price", &typed(1, Some(sold), true));
        next.record("sku", &typed(0, None, true));
        run.merge(next);
        assert_eq!(run.fields["price"].unparsed, 2);
        assert_eq!(
            run.notes(),
            [
                "price: 2 value(s) did not parse (first: \"Call us\" is not a number)",
                "price: 1 item(s) left out, required and without a value",
                "sku: 1 item(s) left out, required and without a value",
            ]
        );
    }
}
