//! What the driver prints at the end: the details of every finding, the
//! failures last, then one line of figures.

use std::time::Duration;

use crate::{fleet::Restart, ledger::Tally, sightings::Sighting};

/// Prints the details, then the line of figures; whether the run passed.
pub fn report(
    tally: &Tally,
    restarts: &[Restart],
    seen: &[Sighting],
    trap: usize,
    took: Duration,
) -> bool {
    let section = |title: &str, lines: &[String]| {
        if lines.is_empty() {
            return;
        }
        println!("{title} ({}):", lines.len());
        for line in lines {
            println!("  - {line}");
        }
    };
    section(
        "FAILURE accepted (hostile requests the API took)",
        &tally.accepted,
    );
    section(
        "FAILURE wrong field (refusals naming another field)",
        &tally.wrong_field,
    );
    section(
        "FAILURE unexpected (answers other than due, smuggled requests answered, probes that did not run)",
        &tally.unexpected,
    );
    section(
        "FAILURE breaches (a secret handed over or shown, /metrics open or unbounded)",
        &tally.breaches,
    );
    section("FAILURE 5xx answers", &tally.server_errors);
    section(
        "FAILURE resets/timeouts where an answer was due",
        &tally.dropped,
    );
    section(
        "FAILURE requests with a token starved by another client's connections",
        &tally.starved,
    );
    let restart_lines: Vec<String> = restarts
        .iter()
        .map(|r| {
            let lines = r
                .last_lines
                .iter()
                .map(|l| format!("\n        {l}"))
                .collect::<String>();
            format!(
                "{} exited ({}), log {}; last lines:{lines}",
                r.role,
                r.status,
                r.log.display()
            )
        })
        .collect();
    section("FAILURE process restarts", &restart_lines);
    section("FAILURE hostile pages past a bound", &tally.let_through);
    // Counted once per secret and place: where it showed, not how often.
    let secrets_seen: usize = seen.iter().map(|s| s.found.len()).sum();
    let seen_lines: Vec<String> = seen.iter().map(Sighting::to_string).collect();
    section("FAILURE secrets seen (places)", &seen_lines);
    if trap > 0 {
        println!("FAILURE trap connections: {trap} connection(s) reached the trap");
    }
    section(
        "FAILURE driver errors (parts of the catalogue that could not run)",
        &tally.driver_errors,
    );

    let passed = tally.server_errors.is_empty()
        && tally.breaches.is_empty()
        && tally.accepted.is_empty()
        && tally.wrong_field.is_empty()
        && tally.unexpected.is_empty()
        && tally.dropped.is_empty()
        && tally.starved.is_empty()
        && restarts.is_empty()
        && secrets_seen == 0
        && trap == 0
        && tally.let_through.is_empty()
        && tally.driver_errors.is_empty();
    let driver_errors = match tally.driver_errors.len() {
        0 => String::new(),
        n => format!(", driver errors {n}"),
    };
    println!(
        "abuse {}: requests {}, breaches {}, 5xx {}, resets/timeouts {}, starved {}, \
         process restarts {}, secrets seen {}, trap connections {trap}, past a bound {}, \
         wrong field {}, accepted {}, unexpected {}{driver_errors}, took {:.0}s",
        if passed { "OK" } else { "FAILED" },
        tally.requests,
        tally.breaches.len(),
        tally.server_errors.len(),
        tally.dropped.len(),
        tally.starved.len(),
        restarts.len(),
        secrets_seen,
        tally.let_through.len(),
        tally.wrong_field.len(),
        tally.accepted.len(),
        tally.unexpected.len(),
        took.as_secs_f64(),
    );
    passed
}
