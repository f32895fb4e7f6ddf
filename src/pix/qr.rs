//! Rendering a payload as a QR code PNG.
//!
//! Invariants: black modules on white, a 4-module quiet zone on every side, [`MODULE_PX`]
//! pixels per module, 8-bit grayscale; error correction level M, the level Pix apps use.
//! The image is `(modules + 8) * MODULE_PX` pixels square.

use qrcode::{Color, EcLevel, QrCode};

/// Large enough for a phone camera reading a screen, small enough for a WhatsApp image.
pub const MODULE_PX: usize = 8;
/// The QR specification's minimum margin, in modules.
pub const QUIET_ZONE: usize = 4;

const BLACK: u8 = 0;
const WHITE: u8 = 255;

#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("the payload does not fit in a QR code: {0}")]
    Encode(#[source] qrcode::types::QrError),
    #[error("failed to write the PNG: {0}")]
    Png(#[source] png::EncodingError),
}

/// The PNG bytes of `payload`'s QR code.
pub fn png(payload: &str) -> Result<Vec<u8>, QrError> {
    let code = QrCode::with_error_correction_level(payload.as_bytes(), EcLevel::M).map_err(QrError::Encode)?;
    let modules = code.width();
    let colors = code.to_colors();
    let side = (modules + 2 * QUIET_ZONE) * MODULE_PX;
    let mut pixels = vec![WHITE; side * side];
    for (index, color) in colors.iter().enumerate() {
        if *color != Color::Dark {
            continue;
        }
        let (x, y) = (index % modules + QUIET_ZONE, index / modules + QUIET_ZONE);
        for row in y * MODULE_PX..(y + 1) * MODULE_PX {
            pixels[row * side + x * MODULE_PX..row * side + (x + 1) * MODULE_PX].fill(BLACK);
        }
    }
    // A QR code has at most 177 modules, so the side always fits in u32.
    let side_px = u32::try_from(side).unwrap_or(u32::MAX);
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, side_px, side_px);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(QrError::Png)?;
    writer.write_image_data(&pixels).map_err(QrError::Png)?;
    writer.finish().map_err(QrError::Png)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D";

    #[test]
    fn renders_a_png_of_the_expected_size() {
        let bytes = png(V1).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR comes first: length, "IHDR", width, height (big-endian).
        assert_eq!(&bytes[12..16], b"IHDR");
        let width = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        let height = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
        let modules = QrCode::with_error_correction_level(V1.as_bytes(), EcLevel::M).unwrap().width();
        assert_eq!(width as usize, (modules + 2 * QUIET_ZONE) * MODULE_PX);
        assert_eq!((height, bytes[24], bytes[25]), (width, 8, 0), "8-bit grayscale");
    }

    #[test]
    fn an_oversized_payload_is_an_error() {
        assert!(matches!(png(&"x".repeat(5000)), Err(QrError::Encode(_))));
    }
}
