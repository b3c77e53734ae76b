//! What a healthy run of a site looks like: enough items, the fields that
//! matter filled in, not empty run after run. A run that completes below its
//! site's expectations is `degraded`: it still counts as crawled, but an
//! operator hears of it (the site changed its markup, or started refusing us).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::super::{FieldError, run::RunHealth};

/// Largest `min_items` a site may expect.
const MAX_MIN_ITEMS: i32 = 100_000;
/// Largest `max_empty_runs`.
const MAX_EMPTY_RUNS: i32 = 1_000;

/// What a healthy completed run of a site finds. Every part is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Expectations)]
pub struct ExpectationsInput {
    /// A completed run with fewer items is degraded.
    pub min_items: Option<i32>,
    /// Fields every item must have (non-empty); one of the site's `fields`.
    #[serde(default)]
    pub required_fields: Vec<String>,
    /// Empty runs of a keyword in a row that are still fine; the next is degraded.
    pub max_empty_runs: Option<i32>,
}

/// A site's expectations of a completed run; the default expects nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectations {
    pub min_items: Option<i32>,
    pub required_fields: Vec<String>,
    pub max_empty_runs: Option<i32>,
}

impl From<Expectations> for ExpectationsInput {
    /// The expectations as a client would send them again.
    fn from(expect: Expectations) -> Self {
        ExpectationsInput {
            min_items: expect.min_items,
            required_fields: expect.required_fields,
            max_empty_runs: expect.max_empty_runs,
        }
    }
}

impl ExpectationsInput {
    /// Checks the bounds, and that each required field is one the site extracts.
    pub fn parse<'a>(
        self,
        fields: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<Expectations, FieldError> {
        if let Some(min) = self.min_items
            && !(1..=MAX_MIN_ITEMS).contains(&min)
        {
            return Err(FieldError::new(
                "expect.min_items",
                format!("must be between 1 and {MAX_MIN_ITEMS}"),
            ));
        }
        if let Some(max) = self.max_empty_runs
            && !(0..=MAX_EMPTY_RUNS).contains(&max)
        {
            return Err(FieldError::new(
                "expect.max_empty_runs",
                format!("must be between 0 and {MAX_EMPTY_RUNS}"),
            ));
        }
        let mut required_fields = self.required_fields;
        for name in &required_fields {
            if !fields.clone().into_iter().any(|field| field == name) {
                return Err(FieldError::new(
                    "expect.required_fields",
                    format!("{name:?} is not one of the site's fields"),
                ));
            }
        }
        required_fields.sort();
        required_fields.dedup();
        Ok(Expectations {
            min_items: self.min_items,
            required_fields,
            max_empty_runs: self.max_empty_runs,
        })
    }
}

impl Expectations {
    pub fn is_empty(&self) -> bool {
        *self == Expectations::default()
    }
}

/// What a completed run found, as its expectations are checked against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTally {
    pub items: i32,
    /// Per required field, the items that lack it.
    pub missing: BTreeMap<String, i64>,
    /// Completed runs of the same keyword and site, right before this one,
    /// that found nothing.
    pub empty_before: i32,
    /// Page requests the site refused during the run (each tried again).
    pub refusals: i32,
    /// What the crawl bounds left out of the run (`BoundsReport::notes`):
    /// each makes the run degraded, whatever the site expects.
    pub bounded: Vec<String>,
    /// Each field's values that did not parse, and items left out for a
    /// required field without one (`ValueReport::notes`): each makes the
    /// run degraded too.
    pub unparsed: Vec<String>,
}

impl Expectations {
    /// Judges a completed run.
    pub fn judge(&self, tally: &RunTally) -> RunHealth {
        let mut unmet = Vec::new();
        if let Some(min) = self.min_items
            && tally.items < min
        {
            unmet.push(format!(
                "{} items, fewer than the {min} expected",
                tally.items
            ));
        }
        for (field, missing) in &tally.missing {
            if *missing > 0 {
                unmet.push(format!(
                    "{field} missing in {missing} of {} items",
                    tally.items
                ));
            }
        }
        if let Some(max) = self.max_empty_runs
            && tally.items == 0
            && tally.empty_before >= max
        {
            unmet.push(format!(
                "{} empty runs in a row, at most {max} expected",
                tally.empty_before + 1
            ));
        }
        // Refusals explain a run that fell short of the site's expectations;
        // one the bounds cut short found too much, not too little, and values
        // that did not parse are the markup's doing, not a refusal's.
        let blocked = !unmet.is_empty() && tally.refusals > 0;
        unmet.extend(tally.bounded.iter().cloned());
        unmet.extend(tally.unparsed.iter().cloned());
        if unmet.is_empty() {
            return RunHealth::Healthy;
        }
        if blocked {
            unmet.push(format!(
                "the site refused {} page request(s)",
                tally.refusals
            ));
        }
        RunHealth::Degraded {
            reason: unmet.join("; "),
            blocked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: [&str; 2] = ["price", "title"];

    fn expect(json: serde_json::Value) -> Result<Expectations, FieldError> {
        serde_json::from_value::<ExpectationsInput>(json)
            .unwrap()
            .parse(FIELDS)
    }

    #[test]
    fn required_fields_must_be_fields_of_the_site() {
        let err = expect(serde_json::json!({"required_fields": ["prise"]})).unwrap_err();
        assert_eq!(err.field, "expect.required_fields");
        assert!(err.message.contains("prise"), "{}", err.message);
        let ok = expect(serde_json::json!({"required_fields": ["title", "price", "title"]}));
        assert_eq!(ok.unwrap().required_fields, ["price", "title"]);
    }

    #[test]
    fn bounds_name_their_field() {
        for (body, field) in [
            (serde_json::json!({"min_items": 0}), "expect.min_items"),
            (
                serde_json::json!({"min_items": 100_001}),
                "expect.min_items",
            ),
            (
                serde_json::json!({"max_empty_runs": -1}),
                "expect.max_empty_runs",
            ),
        ] {
            assert_eq!(expect(body).unwrap_err().field, field);
        }
    }

    #[test]
    fn what_the_bounds_left_out_degrades_any_run_without_blaming_the_site() {
        let tally = RunTally {
            items: 1000,
            refusals: 2,
            bounded: vec!["1 page(s) with more than 1000 items: the items past it dropped".into()],
            ..RunTally::default()
        };
        assert_eq!(
            Expectations::default().judge(&tally),
            RunHealth::Degraded {
                reason: "1 page(s) with more than 1000 items: the items past it dropped".into(),
                blocked: false
            }
        );
    }

    #[test]
    fn values_that_did_not_parse_degrade_any_run_naming_the_field() {
        let tally = RunTally {
            items: 40,
            refusals: 1,
            unparsed: vec![
                "price: 3 value(s) did not parse (first: \"Call us\" is not a number)".into(),
            ],
            ..RunTally::default()
        };
        assert_eq!(
            Expectations::default().judge(&tally),
            RunHealth::Degraded {
                reason: "price: 3 value(s) did not parse (first: \"Call us\" is not a number)"
                    .into(),
                blocked: false
            }
        );
    }

    #[test]
    fn a_site_that_expects_nothing_finds_every_run_healthy() {
        let nothing = Expectations::default();
        assert!(nothing.is_empty());
        let tally = RunTally {
            empty_before: 50,
            refusals: 3,
            ..RunTally::default()
        };
        assert_eq!(nothing.judge(&tally), RunHealth::Healthy);
    }

    #[test]
    fn every_unmet_expectation_is_in_the_reason() {
        let expectations = expect(serde_json::json!({
            "min_items": 10, "required_fields": ["price"], "max_empty_runs": 2
        }))
        .unwrap();
        let few = RunTally {
            items: 4,
            missing: BTreeMap::from([("price".to_owned(), 4)]),
            ..RunTally::default()
        };
        let RunHealth::Degraded { reason, blocked } = expectations.judge(&few) else {
            panic!("4 items without prices is not healthy");
        };
        assert_eq!(
            reason,
            "4 items, fewer than the 10 expected; price missing in 4 of 4 items"
        );
        assert!(!blocked);
        let enough = RunTally {
            items: 12,
            missing: BTreeMap::from([("price".to_owned(), 0)]),
            ..RunTally::default()
        };
        assert_eq!(expectations.judge(&enough), RunHealth::Healthy);
    }

    #[test]
    fn empty_runs_are_fine_up_to_the_limit_in_a_row() {
        let expectations = expect(serde_json::json!({"max_empty_runs": 2})).unwrap();
        let empty = |before| RunTally {
            empty_before: before,
            ..RunTally::default()
        };
        assert_eq!(expectations.judge(&empty(0)), RunHealth::Healthy);
        assert_eq!(expectations.judge(&empty(1)), RunHealth::Healthy);
        assert_eq!(
            expectations.judge(&empty(2)).reason(),
            Some("3 empty runs in a row, at most 2 expected")
        );
    }

    #[test]
    fn refusals_behind_a_degraded_run_mean_the_site_blocks_us() {
        let expectations = expect(serde_json::json!({"min_items": 5})).unwrap();
        let refused = RunTally {
            items: 1,
            refusals: 3,
            ..RunTally::default()
        };
        assert_eq!(
            expectations.judge(&refused),
            RunHealth::Degraded {
                reason: "1 items, fewer than the 5 expected; the site refused 3 page request(s)"
                    .to_owned(),
                blocked: true
            }
        );
        let refused_but_fine = RunTally {
            items: 9,
            refusals: 3,
            ..RunTally::default()
        };
        assert_eq!(expectations.judge(&refused_but_fine), RunHealth::Healthy);
    }
}
