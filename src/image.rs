//! Screenshot pixels: scaling down to a maximum width and PNG encoding.

/// Scales `rgba` (row-major, top-left first) down so that it is at most `max_width`
/// wide, keeping the aspect ratio, by averaging the source pixels each target pixel
/// covers. Images already narrow enough are returned as they are.
pub fn fit_width(width: u32, height: u32, rgba: Vec<u8>, max_width: u32) -> (u32, u32, Vec<u8>) {
    if width <= max_width || width == 0 || height == 0 {
        return (width, height, rgba);
    }
    let new_width = max_width.max(1);
    let new_height =
        ((u64::from(height) * u64::from(new_width) + u64::from(width) / 2) / u64::from(width)).max(1) as u32;
    let (w, h, nw, nh) = (width as usize, height as usize, new_width as usize, new_height as usize);
    let mut out = vec![0u8; nw * nh * 4];
    for ty in 0..nh {
        let y0 = ty * h / nh;
        let y1 = ((ty + 1) * h / nh).max(y0 + 1);
        for tx in 0..nw {
            let x0 = tx * w / nw;
            let x1 = ((tx + 1) * w / nw).max(x0 + 1);
            let mut sum = [0u32; 4];
            for y in y0..y1 {
                let row = &rgba[(y * w + x0) * 4..(y * w + x1) * 4];
                for px in row.chunks_exact(4) {
                    for c in 0..4 {
                        sum[c] += u32::from(px[c]);
                    }
                }
            }
            let count = ((y1 - y0) * (x1 - x0)) as u32;
            let at = (ty * nw + tx) * 4;
            for c in 0..4 {
                out[at + c] = ((sum[c] + count / 2) / count) as u8;
            }
        }
    }
    (new_width, new_height, out)
}

/// Encodes RGBA8 pixels as a PNG, favouring speed over size: a screenshot is looked at
/// once, and the agent is waiting.
pub fn encode_png(width: u32, height: u32, rgba: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::with_capacity(rgba.len() / 4);
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(rgba)?;
        writer.finish()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    #[test]
    fn png_round_trips_pixels() {
        let rgba: Vec<u8> = (0..4 * 3 * 4).map(|i| (i * 7) as u8).collect();
        let png = encode_png(4, 3, &rgba).unwrap();
        assert_eq!(decode(&png), (4, 3, rgba));
    }

    #[test]
    fn wide_images_are_scaled_keeping_aspect_and_colour() {
        // 8×4, left half red, right half blue → 4×2.
        let mut rgba = Vec::new();
        for _y in 0..4 {
            for x in 0..8 {
                rgba.extend_from_slice(if x < 4 { &[255, 0, 0, 255] } else { &[0, 0, 255, 255] });
            }
        }
        let (w, h, out) = fit_width(8, 4, rgba, 4);
        assert_eq!((w, h), (4, 2));
        assert_eq!(&out[0..4], &[255, 0, 0, 255]);
        assert_eq!(&out[12..16], &[0, 0, 255, 255]);
    }

    #[test]
    fn narrow_images_are_untouched() {
        let rgba = vec![1u8; 2 * 2 * 4];
        assert_eq!(fit_width(2, 2, rgba.clone(), 1280), (2, 2, rgba));
    }
}
