//! A fetched page's body kept for saved pages: deflated on the thread that
//! reads the page (never on the runtime), inflated back for a replay within
//! a bound, so a saved body cannot grow past what a page may be.

use std::io::{Read, Write};

use flate2::{Compression, read::DeflateDecoder, write::DeflateEncoder};

use crate::domain::saved_page::KeptBody;

/// `body`, deflated.
pub fn deflate(body: &[u8]) -> KeptBody {
    let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
    // Writing to a Vec cannot fail.
    encoder.write_all(body).expect("deflating into memory");
    KeptBody {
        deflated: encoder.finish().expect("deflating into memory"),
        raw_bytes: body.len(),
    }
}

/// A saved body inflated back; an error when it is not deflate data or
/// grows past `max_bytes`.
pub fn inflate(deflated: &[u8], max_bytes: usize) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    DeflateDecoder::new(deflated)
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut body)?;
    if body.len() > max_bytes {
        return Err(std::io::Error::other(format!(
            "the saved page inflates past {max_bytes} bytes"
        )));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_comes_back_as_it_was() {
        let page = "<li class=item>laptop</li>".repeat(1000);
        let kept = deflate(page.as_bytes());
        assert_eq!(kept.raw_bytes, page.len());
        assert!(kept.deflated.len() < page.len() / 10);
        assert_eq!(
            inflate(&kept.deflated, page.len()).unwrap(),
            page.as_bytes()
        );
    }

    #[test]
    fn a_body_past_its_bound_is_refused() {
        let kept = deflate(&[b'a'; 10_000]);
        assert!(inflate(&kept.deflated, 9_999).is_err());
        assert!(inflate(b"not deflate", 100).is_err());
    }
}
