//! Button reply ids: `ClickId::parse` takes anything a customer's client can send.
#![no_main]

use balcao::domain::ClickId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    if let Some(click) = ClickId::parse(raw) {
        // Only the canonical spelling parses, so it must come back byte for byte.
        assert_eq!(click.id(), raw);
        assert_eq!(ClickId::parse(&click.id()), Some(click));
    }
});
