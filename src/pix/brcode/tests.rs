use proptest::prelude::*;

use super::*;
use crate::pix::fold::fold_ascii;
use crate::pix::key::PixKeyType;
use crate::pix::txid::Txid;

/// Published valid payloads (the same as tests/fixtures/pix/brcode-valid.txt).
const V1: &str = "00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D";
const V2: &str = "00020101021226700014br.gov.bcb.pix2548pix.example.com/8b3da2f39a4140d1a91abd93113bd4415204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***630464E4";
const V7: &str = "00020104141234567890123426580014BR.GOV.BCB.PIX0136123e4567-e12b-12d1-a456-42665544000027300012BR.COM.OUTRO011001234567895204000053039865406123.455802BR5917NOME DO RECEBEDOR6008BRASILIA61087007490062190515RP12345678-201980390012BR.COM.OUTRO01190123.ABCD.3456.WXYZ6304AD38";
const V9: &str = "00020126760014br.gov.bcb.pix01365f9393a0-4324-4549-be2e-d4c3fcfbb4f10214FC-47490-1543052040000530398654040.125802BR5921RUMO INFORMATICA LTDA6009SAO PAULO6222051800047490000001543063042B40";
const V12: &str = "00020126700014br.gov.bcb.pix0136403f6c37-bb1d-48aa-a61c-0f6a205764d80208[Pix.ae]5204000053039865802BR5903Pix6003Pix63042275";
const V13A: &str = "00020126510014br.gov.bcb.pix0115thalesog@me.com0210Pedido 123520400005303986540510.005802BR5914THALES OGLIARI6015SAO MIGUEL DO O62070503***63040DC6";
const VALID: [&str; 6] = [V1, V2, V7, V9, V12, V13A];

const PIX_26: &str = "26580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-426655440000";
const EVP: &str = "123e4567-e12b-12d1-a456-426655440000";

/// A payload built from `body` (everything before the CRC) with a correct CRC.
fn with_crc(body: &str) -> String {
    let head = format!("{body}6304");
    let crc = crc16_hex(head.as_bytes());
    format!("{head}{crc}")
}

/// V1's fields before the CRC, with `from` replaced by `to`.
fn v1_with(from: &str, to: &str) -> String {
    let body = V1.strip_suffix("63041D3D").unwrap();
    assert!(body.contains(from), "{from}");
    with_crc(&body.replacen(from, to, 1))
}

fn err(payload: &str) -> String {
    decode(payload).expect_err(payload).to_string()
}

fn charge() -> StaticCharge {
    StaticCharge {
        key: PixKey::parse(PixKeyType::Evp, EVP).unwrap(),
        merchant_name: "Barbearia do Zé".into(),
        merchant_city: "São Paulo".into(),
        amount: Some(Cents(5000)),
        txid: Some(Txid::parse("Pedido42").unwrap()),
        description: None,
    }
}

#[test]
fn published_vectors_decode_and_reencode_byte_for_byte() {
    for payload in VALID {
        let code = decode(payload).unwrap_or_else(|e| panic!("{payload}: {e}"));
        assert_eq!(code.encode(), payload);
    }
}

#[test]
fn accessors_read_the_typed_fields() {
    let v1 = decode(V1).unwrap();
    assert_eq!(v1.key().map(|k| (k.kind(), k.as_str())), Some((PixKeyType::Evp, EVP)));
    assert_eq!((v1.amount(), v1.txid(), v1.url(), v1.is_dynamic()), (None, None, None, false));
    assert_eq!((v1.merchant_name(), v1.merchant_city(), v1.crc()), ("Fulano de Tal", "BRASILIA", "1D3D"));

    let v2 = decode(V2).unwrap();
    assert_eq!(v2.url(), Some("pix.example.com/8b3da2f39a4140d1a91abd93113bd441"));
    assert!(v2.is_dynamic() && v2.key().is_none());

    let v7 = decode(V7).unwrap();
    assert_eq!((v7.amount(), v7.txid()), (Some(Cents(12345)), Some("RP12345678-2019")));
    let outro = v7.field(27).and_then(Field::children).unwrap();
    assert_eq!(outro[0].value(), "BR.COM.OUTRO");
    assert_eq!(v7.field(80).and_then(Field::children).map(<[Field]>::len), Some(2));

    let v9 = decode(V9).unwrap();
    assert_eq!((v9.amount(), v9.txid()), (Some(Cents(12)), Some("000474900000015430")));
    assert_eq!(v9.description(), Some("FC-47490-15430"));
    assert_eq!(decode(V12).unwrap().field(62), None);
    assert_eq!(decode(V13A).unwrap().key().map(PixKey::kind), Some(PixKeyType::Email));
}

#[test]
fn crc_errors() {
    let body = V1.strip_suffix("1D3D").unwrap();
    assert_eq!(err(&format!("{body}1D3E")), "wrong CRC: the payload says 1D3E, the correct CRC is 1D3D");
    assert!(err(&format!("{body}1d3d")).contains("uppercase hex"));
    assert!(err(body).contains("empty"));
    assert!(err(body.strip_suffix("6304").unwrap()).contains("no CRC field"));
    assert!(err("").contains("no CRC field"));
}

/// One TLV field.
fn tlv(id: &str, value: &str) -> String {
    format!("{id}{:02}{value}", value.len())
}

/// A Pix Automático code ("Jornada 2"): `26` holds the GUI alone, the recurrence sits in `80`.
fn automatic(recurrence: &str) -> String {
    let body = V1.strip_suffix("62070503***63041D3D").unwrap().replace(PIX_26, &tlv("26", "0014br.gov.bcb.pix"));
    with_crc(&format!("{body}62070503***{recurrence}"))
}

#[test]
fn pix_automatico_codes_carry_the_recurrence_in_field_80() {
    let rec = "pix.example.com/rec/RN123456782024011577825445612";
    let payload = automatic(&tlv("80", &format!("0014br.gov.bcb.pix{}", tlv("25", rec))));
    let code = decode(&payload).unwrap();
    assert_eq!((code.key(), code.url(), code.recurrence_url()), (None, None, Some(rec)));
    assert!(code.is_dynamic() && code.warnings().is_empty());
    assert_eq!(code.encode(), payload);
    // Without a recurrence, or with another arrangement's template in 80, the GUI alone is not enough.
    for payload in [automatic(""), automatic("80390012BR.COM.OUTRO01190123.ABCD.3456.WXYZ")] {
        assert!(err(&payload).contains("needs a key (26-01) or a URL (26-25), or a Pix Automático"), "{payload}");
    }
    assert!(err(&automatic(&tlv("80", "0014br.gov.bcb.pix"))).contains("80-25"));
    let with_scheme = tlv("80", &format!("0014br.gov.bcb.pix{}", tlv("25", "https://pix.ex/rec")));
    assert!(err(&automatic(&with_scheme)).contains("scheme"));
}

#[test]
fn a_dynamic_codes_nonconforming_txid_is_a_warning_a_static_codes_an_error() {
    let long = tlv("62", &tlv("05", "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345678"));
    let dynamic = with_crc(&format!("{}{long}", V2.strip_suffix("62070503***630464E4").unwrap()));
    let code = decode(&dynamic).unwrap();
    assert_eq!(code.txid(), Some("ABCDEFGHIJKLMNOPQRSTUVWXYZ012345678"));
    assert_eq!(code.warnings().len(), 1);
    assert!(code.warnings()[0].contains("62-05") && code.warnings()[0].contains("the maximum is 25"));
    assert!(decode(V2).unwrap().warnings().is_empty());
    assert!(err(&v1_with("62070503***", &long)).contains("62-05"));
}

#[test]
fn field_rules() {
    for (payload, expected) in [
        (v1_with("5913Fulano de Tal", "5926ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "59 (Merchant Name)"),
        (v1_with("6008BRASILIA", "6019Presidente Prudente"), "the maximum is 15"),
        (v1_with("6008BRASILIA", "6007Maceió"), "'ó'"),
        (v1_with("6008BRASILIA", "6006Maceió"), "multi-byte"),
        (v1_with("5303986", "5303840"), "986"),
        (v1_with("5802BR", "5802PT"), "must be BR"),
        (v1_with("52040000", "5203000"), "4 digits"),
        (v1_with("000201", "000202"), "must be 01"),
        (v1_with("000201", "010211"), "first field"),
        (v1_with("5802BR", "5802BR5802BR"), "58 (Country Code) appears twice"),
        (v1_with("5913Fulano de Tal", ""), "missing required field 59"),
        (v1_with("0014br.gov.bcb.pix", "0014br.gov.bcb.pax"), "26-00"),
        (v1_with("0136123e4567", "0136123E4567"), "26-01 (Pix Key)"),
        (v1_with("5802BR", "54051,0005802BR"), "54 (Transaction Amount)"),
        (v1_with("5802BR", "54040.005802BR"), "positive"),
        (v1_with("5802BR", "54051.5555802BR"), "54"),
        (v1_with("62070503***", "62300526ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "62-05"),
        (v1_with("62070503***", "62090505A B C"), "without spaces"),
        (v1_with("62070503***", "6200"), "length 00"),
        (v1_with(PIX_26, "26720014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400002510pix.ex/abc"), "both"),
        (v1_with(PIX_26, "26180014br.gov.bcb.pix"), "needs a key"),
        (v1_with(PIX_26, "26380014br.gov.bcb.pix2516https://pix.ex/a"), "scheme"),
        (v1_with(PIX_26, "26400136123e4567-e12b-12d1-a456-426655440000"), "must start with the GUI"),
    ] {
        let message = err(&payload);
        assert!(message.contains(expected), "{payload}: {message:?} lacks {expected:?}");
    }
    assert!(matches!(decode(&"0".repeat(513)), Err(BrCodeError::TooLong(513))));
}

#[test]
fn static_charge_reproduces_a_published_code() {
    let charge = StaticCharge {
        key: PixKey::parse(PixKeyType::Email, "thalesog@me.com").unwrap(),
        merchant_name: "Thales Ogliari".into(),
        merchant_city: "São Miguel do Ó".into(),
        amount: Some(Cents(1000)),
        txid: None,
        description: Some("Pedido 123".into()),
    };
    assert_eq!(charge.encode().unwrap(), V13A);
}

#[test]
fn static_charge_folds_cuts_and_checks() {
    let code = charge().to_brcode().unwrap();
    assert_eq!((code.merchant_name(), code.merchant_city()), ("BARBEARIA DO ZE", "SAO PAULO"));
    assert_eq!((code.amount(), code.txid(), code.description()), (Some(Cents(5000)), Some("Pedido42"), None));

    let long = StaticCharge {
        merchant_name: "Salão de Beleza Maria José da Silva".into(),
        merchant_city: "São José dos Campos".into(),
        ..charge()
    };
    let code = long.to_brcode().unwrap();
    assert_eq!((code.merchant_name(), code.merchant_city()), ("SALAO DE BELEZA MARIA JOS", "SAO JOSE DOS CA"));
    // A cut that lands on a space does not leave it at the end.
    let spaced = StaticCharge { merchant_name: format!("{} B", "A".repeat(24)), ..charge() };
    assert_eq!(spaced.to_brcode().unwrap().merchant_name(), "A".repeat(24));

    for bad in [
        StaticCharge { merchant_name: "☕".into(), ..charge() },
        StaticCharge { merchant_city: " ".into(), ..charge() },
        StaticCharge { amount: Some(Cents(0)), ..charge() },
        StaticCharge { txid: Some(Txid::parse(&"a".repeat(26)).unwrap()), ..charge() },
    ] {
        assert!(bad.encode().is_err(), "{bad:?}");
    }
}

#[test]
fn description_is_kept_only_when_the_template_fits() {
    let email = format!("{}@example.com", "a".repeat(60));
    let key = PixKey::parse(PixKeyType::Email, &email).unwrap();
    let fits = StaticCharge { description: Some("Corte de cabelo".into()), ..charge() };
    assert_eq!(fits.to_brcode().unwrap().description(), Some("Corte de cabelo"));
    // 18 (GUI) + 4 + 72 (key) = 94: a description would push the template past 99.
    let dropped = StaticCharge { key, description: Some("Corte".into()), ..charge() };
    let code = dropped.to_brcode().unwrap();
    assert_eq!((code.description(), code.key().map(PixKey::as_str)), (None, Some(email.as_str())));
}

fn mutate(payload: &str, edits: &[(usize, u8)], fix_crc: bool) -> String {
    let mut bytes = payload.as_bytes().to_vec();
    for &(index, byte) in edits {
        let i = index % (bytes.len() + 1);
        match byte % 3 {
            0 if i < bytes.len() => bytes[i] = byte,
            1 if i < bytes.len() => {
                bytes.remove(i);
            }
            _ => bytes.insert(i, byte),
        }
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if !fix_crc {
        return text;
    }
    let body = text.get(..text.len().saturating_sub(8)).unwrap_or("");
    with_crc(body)
}

fn any_key() -> impl Strategy<Value = PixKey> {
    let evp = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}".prop_map(|s| (PixKeyType::Evp, s));
    let email = "[a-z0-9._]{1,30}@[a-z]{1,20}\\.com(\\.br)?".prop_map(|s| (PixKeyType::Email, s));
    let phone = "\\+55[1-9][0-9]{9,10}".prop_map(|s| (PixKeyType::Phone, s));
    let fixed = prop::sample::select(vec![(PixKeyType::Cpf, "52998224725"), (PixKeyType::Cnpj, "11222333000181")])
        .prop_map(|(k, s)| (k, s.to_owned()));
    prop_oneof![evp, email, phone, fixed].prop_map(|(kind, raw)| PixKey::parse(kind, &raw).unwrap())
}

const NAME_CHARS: &str = "[a-zA-Z0-9 ÀÁÂÃÇÉÊÍÓÔÕÚàáâãçéêíóôõú&.'☕-]{1,40}";
const CITY_CHARS: &str = "[a-zA-Z ÃÇÉÍÓãçéíóô-]{1,30}";

proptest! {
    #[test]
    fn decode_never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = decode(&text);
    }

    #[test]
    fn decode_never_panics_on_mutated_vectors(
        which in 0..VALID.len(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        fix_crc in any::<bool>(),
    ) {
        let payload = mutate(VALID[which], &edits, fix_crc);
        if let Ok(code) = decode(&payload) {
            // Whatever decodes re-encodes to itself.
            prop_assert_eq!(code.encode(), payload);
        }
    }

    #[test]
    fn static_charges_round_trip(
        key in any_key(),
        name in NAME_CHARS,
        city in CITY_CHARS,
        amount in prop::option::of(1i64..=1_000_000_000),
        txid in prop::option::of("[A-Za-z0-9]{1,25}"),
        description in prop::option::of("\\PC{0,60}"),
    ) {
        prop_assume!(!fold_ascii(&name).is_empty() && !fold_ascii(&city).is_empty());
        let charge = StaticCharge {
            key,
            merchant_name: name.clone(),
            merchant_city: city.clone(),
            amount: amount.map(Cents),
            txid: txid.as_deref().map(|t| Txid::parse(t).unwrap()),
            description,
        };
        let payload = charge.encode().unwrap();
        let code = decode(&payload).unwrap();
        prop_assert_eq!(code.encode(), payload);
        prop_assert_eq!(code.key(), Some(&charge.key));
        prop_assert_eq!(code.amount(), charge.amount);
        prop_assert_eq!(code.txid(), txid.as_deref());
        let folded = |s: &str, max: usize| {
            let mut f = fold_ascii(s).to_ascii_uppercase();
            f.truncate(max);
            f.trim_end().to_owned()
        };
        prop_assert_eq!(code.merchant_name(), folded(&name, MAX_NAME_LEN));
        prop_assert_eq!(code.merchant_city(), folded(&city, MAX_CITY_LEN));
    }
}
