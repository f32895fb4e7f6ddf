//! The wire level of a BR Code: EMV TLV fields and the CRC that closes the payload.
//!
//! Invariants: [`Tlv`] yields fields that exactly tile its input (2-digit id, 2-digit length
//! counted in bytes, 1..=99 bytes of value that end on a character boundary) and stops at the
//! first malformed one; [`check_crc`] accepts a payload only if it ends with `6304` and the
//! 4 uppercase hex digits of CRC-16/CCITT-FALSE over everything before them. Nothing here
//! panics or slices outside its input.

/// What is wrong with a payload at the wire level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlvError {
    #[error("no CRC field (63) at the end: a BR Code ends with 6304 and 4 hex digits")]
    MissingCrc,
    #[error("the CRC field (63) is empty: 6304 must be followed by 4 hex digits")]
    EmptyCrc,
    #[error("the CRC field (63) must hold 4 uppercase hex digits, found {0:?}")]
    MalformedCrc(String),
    #[error("wrong CRC: the payload says {found}, the correct CRC is {computed}")]
    WrongCrc { found: String, computed: String },
    #[error("malformed TLV at byte {at}: {message}")]
    Structure { at: usize, message: String },
}

/// Iterates over the TLV fields of `text` as `(id, value, offset)`; stops after an error.
pub(crate) struct Tlv<'a> {
    text: &'a str,
    pos: usize,
    base: usize,
}

impl<'a> Tlv<'a> {
    pub(crate) fn new(text: &'a str, base: usize) -> Self {
        Self { text, pos: 0, base }
    }
}

impl<'a> Iterator for Tlv<'a> {
    type Item = Result<(u8, &'a str, usize), TlvError>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        let pos = self.pos;
        if pos >= bytes.len() {
            return None;
        }
        self.pos = bytes.len();
        let at = self.base + pos;
        let fail = |message: String| Some(Err(TlvError::Structure { at, message }));
        let header = match bytes.get(pos..pos + 4) {
            Some(h) if h.iter().all(u8::is_ascii_digit) => h,
            _ => return fail("expected a 2-digit id and a 2-digit length".to_owned()),
        };
        let digit = |i: usize| header[i] - b'0';
        let id = digit(0) * 10 + digit(1);
        let len = usize::from(digit(2) * 10 + digit(3));
        let start = pos + 4;
        if len == 0 {
            return fail(format!("field {id:02} has length 00"));
        }
        if start + len > bytes.len() {
            return fail(format!("field {id:02} declares {len} bytes but only {} remain", bytes.len() - start));
        }
        let Some(value) = self.text.get(start..start + len) else {
            return fail(format!(
                "field {id:02} declares {len} bytes, which ends inside a multi-byte character (lengths count bytes)"
            ));
        };
        self.pos = start + len;
        Some(Ok((id, value, at)))
    }
}

pub(crate) fn check_crc(payload: &str) -> Result<(), TlvError> {
    let bytes = payload.as_bytes();
    let window = bytes.len().saturating_sub(8);
    let Some(i) = bytes[window..].windows(4).position(|w| w == b"6304") else {
        return Err(TlvError::MissingCrc);
    };
    let crc_start = window + i + 4;
    let found = &bytes[crc_start..];
    if found.is_empty() {
        return Err(TlvError::EmptyCrc);
    }
    if found.len() != 4 || !found.iter().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b)) {
        return Err(TlvError::MalformedCrc(String::from_utf8_lossy(found).into_owned()));
    }
    let computed = crc16_hex(&bytes[..crc_start]);
    if found != computed.as_bytes() {
        return Err(TlvError::WrongCrc { found: String::from_utf8_lossy(found).into_owned(), computed });
    }
    Ok(())
}

/// CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection), as 4 uppercase hex digits.
pub(crate) fn crc16_hex(bytes: &[u8]) -> String {
    let mut crc: u16 = 0xFFFF;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    format!("{crc:04X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_check_value_and_zero_padding() {
        // The catalogue's check value for CRC-16/CCITT-FALSE.
        assert_eq!(crc16_hex(b"123456789"), "29B1");
        assert_eq!(crc16_hex(b""), "FFFF");
        // A CRC below 0x1000 keeps its leading zero.
        let body = "00020126510014br.gov.bcb.pix0115thalesog@me.com0210Pedido 123520400005303986540510.005802BR\
                    5914THALES OGLIARI6015SAO MIGUEL DO O62070503***6304";
        assert_eq!(crc16_hex(body.as_bytes()), "0DC6");
        assert_eq!(check_crc(&format!("{body}0DC6")), Ok(()));
    }

    #[test]
    fn crc_errors_say_what_is_wrong() {
        assert_eq!(check_crc("0002016304"), Err(TlvError::EmptyCrc));
        assert_eq!(check_crc("000201"), Err(TlvError::MissingCrc));
        assert_eq!(check_crc(""), Err(TlvError::MissingCrc));
        assert_eq!(check_crc("0002016304ab12"), Err(TlvError::MalformedCrc("ab12".into())));
        assert_eq!(check_crc("0002016304AB"), Err(TlvError::MalformedCrc("AB".into())));
        let computed = crc16_hex(b"0002016304");
        assert_eq!(
            check_crc("0002016304FFFF"),
            Err(TlvError::WrongCrc { found: "FFFF".into(), computed: computed.clone() })
        );
        assert_eq!(check_crc(&format!("0002016304{computed}")), Ok(()));
    }

    #[test]
    fn tlv_tiles_its_input_and_stops_at_the_first_error() {
        let fields: Vec<_> = Tlv::new("0002010102125802BR", 0).collect::<Result<_, _>>().unwrap();
        assert_eq!(fields, vec![(0, "01", 0), (1, "12", 6), (58, "BR", 12)]);
        for (bad, at) in [("0002010", 6), ("0x0201", 0), ("000201580", 6), ("5800", 0), ("5905abc", 0)] {
            let results: Vec<_> = Tlv::new(bad, 0).collect();
            match results.last() {
                Some(Err(TlvError::Structure { at: got, .. })) => assert_eq!(*got, at, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // "é" is two bytes: a length that counts characters ends inside it.
        let err = Tlv::new("5901é", 0).next();
        assert!(matches!(err, Some(Err(TlvError::Structure { ref message, .. })) if message.contains("multi-byte")));
        assert!(matches!(Tlv::new("5902é", 0).next(), Some(Ok((59, "é", 0)))));
    }
}
