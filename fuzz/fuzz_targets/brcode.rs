//! The BR Code decoder: never panics, and a decoded code re-encodes byte for byte and decodes
//! to the same fields.
#![no_main]

use balcao::pix::brcode::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(payload) = std::str::from_utf8(data) else { return };
    let Ok(code) = decode(payload) else { return };
    let encoded = code.encode();
    assert_eq!(encoded, payload, "a decoded code must re-encode byte for byte");
    let again = decode(&encoded).expect("a re-encoded code decodes");
    assert_eq!(again, code);
    // The accessors read what the decoder checked.
    let _ = (code.key(), code.url(), code.description(), code.amount(), code.txid());
    let _ = (code.merchant_name(), code.merchant_city(), code.crc(), code.is_dynamic());
});
