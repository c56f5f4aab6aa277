//! Fuzz target `store`: the record image decoder.
//!
//! The bytes are decoded twice: as a whole image (magic, version, length,
//! CRC and payload checks), and as the *payload* of an image given a
//! correct header and CRC, so postcard's decoding of a [`Record`] is
//! reached however unlikely a matching CRC is. What decodes must encode to
//! an image no longer than the one read that decodes to the same record.
//!
//! Every decode goes through [`decode`], the one call of the store's
//! decoder here: when the format gains a parameter (a record key for
//! MACs), only that function changes.

use regent_core::secret::Secret;
use regent_core::store::format::{self, RecordError, CRC_LEN, HEADER_LEN, MAGIC, UNSEALED_VERSION};
use regent_core::store::seal::Sealing;
use regent_core::store::{names, Record};

/// Runs one input (see the module docs).
pub fn target(data: &[u8]) {
    check(data, decode(data));
    // The sealed path (key id, MAC) on the same bytes: refused or verified,
    // never a panic; what verifies re-seals to an image that verifies.
    let sealing = sealing();
    if let Ok((record, _)) = format::decode_with(data, &sealing) {
        let again = format::encode_with(&record, &sealing).expect("a verified record re-seals");
        assert_eq!(format::decode_with(&again, &sealing).map(|(r, _)| r), Ok(record));
    }
    // (A payload past 64 KiB is no more interesting, and its image would
    // only test the harness's own allocation.)
    if data.len() <= 64 * 1024 {
        let image = image_of(data);
        check(&image, decode(&image));
    }
}

/// A master's sealing with a current and a previous secret.
fn sealing() -> Sealing {
    let secret = |s: &[u8]| Secret::new(s.to_vec()).expect("a long enough secret");
    Sealing::with_secret(&secret(b"fuzz-current-secret-0123"))
        .and_previous(&secret(b"fuzz-previous-secret-456"))
}

/// The store's decoder, as a loading store calls it (one record, named).
fn decode(image: &[u8]) -> Result<Record, RecordError> {
    format::decode_named("fuzz/record", image)
}

/// `payload` framed as a record image with a correct header and CRC.
fn image_of(payload: &[u8]) -> Vec<u8> {
    let mut image = Vec::with_capacity(HEADER_LEN + payload.len() + CRC_LEN);
    image.extend_from_slice(&MAGIC);
    image.extend_from_slice(&UNSEALED_VERSION.to_be_bytes());
    image.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    image.extend_from_slice(payload);
    let crc = crc32c::crc32c(&image);
    image.extend_from_slice(&crc.to_be_bytes());
    image
}

fn check(image: &[u8], decoded: Result<Record, RecordError>) {
    match decoded {
        Ok(record) => {
            let again = format::encode(&record).expect("a record that decoded re-encodes");
            assert!(again.len() <= image.len(), "re-encoded image is longer than the one read");
            assert_eq!(
                decode(&again),
                Ok(record.clone()),
                "a record does not survive encode/decode"
            );
            let _ = names::key_stem(&record.key());
        }
        Err(e) => {
            assert_eq!(e.record, "fuzz/record");
            let _ = e.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::Epoch;

    #[test]
    fn the_harness_frames_images_as_the_store_does() {
        let img = format::encode(&Record::Epoch(Epoch(7))).unwrap();
        let body = &img[..img.len() - CRC_LEN];
        assert_eq!(crc32c::crc32c(body).to_be_bytes(), img[img.len() - CRC_LEN..]);
        assert_eq!(image_of(&img[HEADER_LEN..img.len() - CRC_LEN]), img);
    }
}
