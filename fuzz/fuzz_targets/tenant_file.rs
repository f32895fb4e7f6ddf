//! The declarative tenant file (`balcao tenant apply FILE.toml`).
#![no_main]

use balcao::tenant::{TenantFileError, TenantSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match TenantSpec::parse(text) {
        Ok(spec) => {
            for service in &spec.catalog.services {
                assert!(service.deposit.0 >= 0 && service.deposit <= service.price);
            }
        }
        // A reported line lies inside the file.
        Err(TenantFileError::Invalid { line, .. }) => assert!(line >= 1 && line <= text.lines().count().max(1) + 1),
        Err(TenantFileError::Syntax(_)) => {}
    }
});
