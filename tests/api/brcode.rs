//! The published BR Code vectors (tests/fixtures/pix, sources in their headers), through the
//! library and the binary.

use std::process::{Command, Output};

use balcao::pix::brcode::decode;

/// The non-comment lines of a vector file in the shared folder beside the repository.
fn vectors(name: &str) -> Vec<String> {
    let path = format!("{}/tests/fixtures/pix/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    text.lines().map(str::trim_end).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect()
}

fn valid() -> Vec<String> {
    vectors("brcode-valid.txt")
}

/// `(payload, stated reason)` from the tab-separated invalid file.
fn invalid() -> Vec<(String, String)> {
    vectors("brcode-invalid.txt")
        .iter()
        .map(|l| l.split_once('\t').unwrap_or_else(|| panic!("no reason on {l:?}")))
        .map(|(payload, reason)| (payload.to_owned(), reason.to_owned()))
        .collect()
}

/// What our error must say for each reason the vector file states.
fn expected_fragments(reason: &str) -> Vec<String> {
    if let Some(inner) = reason.strip_prefix("wrong CRC (").and_then(|r| r.strip_suffix(')')) {
        return match inner.strip_prefix("correct is ") {
            Some(crc) => vec!["wrong CRC".into(), format!("the correct CRC is {crc}")],
            None => vec!["wrong CRC".into(), format!("says {inner}")],
        };
    }
    match reason {
        "empty CRC field" => vec!["CRC field (63) is empty".into()],
        "no CRC field" => vec!["no CRC field".into()],
        r if r.contains("merchant name longer than 25") => vec!["59 (Merchant Name)".into(), "maximum is 25".into()],
        other => panic!("no expectation for the reason {other:?}: add one here"),
    }
}

fn balcao(args: &[&str]) -> Output {
    // No environment and an empty directory: the pix tools need no configuration or .env.
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_balcao")).args(args).current_dir(dir.path()).env_clear().output().unwrap()
}

#[test]
fn every_valid_vector_decodes_and_reencodes_byte_for_byte() {
    let vectors = valid();
    assert!(vectors.len() >= 7, "only {} valid vectors read", vectors.len());
    for payload in vectors {
        let code = decode(&payload).unwrap_or_else(|e| panic!("{payload}: {e}"));
        assert_eq!(code.encode(), payload);
    }
}

#[test]
fn every_invalid_vector_is_rejected_for_its_stated_reason() {
    let vectors = invalid();
    assert!(vectors.len() >= 6, "only {} invalid vectors read", vectors.len());
    for (payload, reason) in vectors {
        let message = decode(&payload).expect_err(&payload).to_string();
        for fragment in expected_fragments(&reason) {
            assert!(message.contains(&fragment), "{payload}\nstated: {reason}\nours: {message}\nlacks: {fragment}");
        }
    }
}

#[test]
fn pix_decode_exits_0_on_a_valid_payload_and_1_with_the_reason_on_an_invalid_one() {
    let out = balcao(&["pix", "decode", &valid()[0]]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Merchant Account Information") && stdout.contains("CRC OK"), "{stdout}");

    let (payload, _) = &invalid()[0];
    let out = balcao(&["pix", "decode", payload]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrong CRC") && stderr.contains("B15A"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn pix_encode_prints_a_payload_that_decodes() {
    let out = balcao(&[
        "pix",
        "encode",
        "--key",
        "+55 61 99999-9999",
        "--key-type",
        "phone",
        "--name",
        "Fulano de Tal",
        "--city",
        "Brasília",
        "--amount",
        "10.00",
        "--txid",
        "Pedido42",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let payload = String::from_utf8(out.stdout).unwrap();
    let code = decode(payload.trim_end()).unwrap();
    assert_eq!(
        (code.merchant_name(), code.merchant_city(), code.txid()),
        ("FULANO DE TAL", "BRASILIA", Some("Pedido42"))
    );

    let out = balcao(&["pix", "encode", "--key", "1", "--key-type", "cpf", "--name", "A", "--city", "B"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CPF"));
}
