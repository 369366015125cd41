//! Screenshot pixels: scaling down to a maximum width and PNG encoding.

/// Scales `rgba` (row-major, top-left first) down so that it is at most `max_width`
/// wide, keeping the aspect ratio, by averaging the source pixels each target pixel
/// covers. Images already narrow enough are returned as they are.
///
/// When scaling down, the boxes of source pixels that the target pixels cover tile
/// the source exactly, so the source is read once, in order: each source pixel is
/// added to the sums of the one target column that covers it.
pub fn fit_width(width: u32, height: u32, rgba: Vec<u8>, max_width: u32) -> (u32, u32, Vec<u8>) {
    if width <= max_width || width == 0 || height == 0 {
        return (width, height, rgba);
    }
    let new_width = max_width.max(1);
    let new_height =
        ((u64::from(height) * u64::from(new_width) + u64::from(width) / 2) / u64::from(width)).max(1) as u32;
    let (w, h, nw, nh) = (width as usize, height as usize, new_width as usize, new_height as usize);
    // Target column of each source column, and the width of each target column's box.
    let mut owner = Vec::with_capacity(w);
    let mut box_width = Vec::with_capacity(nw);
    for tx in 0..nw {
        let x0 = tx * w / nw;
        let x1 = ((tx + 1) * w / nw).max(x0 + 1);
        owner.extend(std::iter::repeat_n(tx, x1 - x0));
        box_width.push((x1 - x0) as u32);
    }
    let mut out = vec![0u8; nw * nh * 4];
    let mut sums = vec![0u32; nw * 4];
    // Box heights take one or two values, so the divisors of each are worked out once.
    let mut reciprocals: Vec<(u32, Vec<Reciprocal>)> = Vec::new();
    for (ty, target) in out.chunks_exact_mut(nw * 4).enumerate() {
        let y0 = ty * h / nh;
        let y1 = ((ty + 1) * h / nh).max(y0 + 1);
        sums.fill(0);
        for row in rgba[y0 * w * 4..y1 * w * 4].chunks_exact(w * 4) {
            for (px, &tx) in row.chunks_exact(4).zip(&owner) {
                let sum = &mut sums[tx * 4..tx * 4 + 4];
                sum[0] += u32::from(px[0]);
                sum[1] += u32::from(px[1]);
                sum[2] += u32::from(px[2]);
                sum[3] += u32::from(px[3]);
            }
        }
        let rows = (y1 - y0) as u32;
        let divisors = match reciprocals.iter().position(|(r, _)| *r == rows) {
            Some(i) => &reciprocals[i].1,
            None => {
                let table = box_width
                    .iter()
                    .map(|&columns| Reciprocal::of(rows * columns))
                    .collect();
                reciprocals.push((rows, table));
                &reciprocals[reciprocals.len() - 1].1
            }
        };
        for ((pixel, sum), divisor) in target.chunks_exact_mut(4).zip(sums.chunks_exact(4)).zip(divisors) {
            for c in 0..4 {
                pixel[c] = divisor.rounded_quotient(sum[c]) as u8;
            }
        }
    }
    (new_width, new_height, out)
}

/// Division by a box's pixel count, rounded to nearest, as a multiplication: exact
/// for the sums a box of up to 65,536 pixels of 8-bit channels can reach, which covers
/// every scale but the most extreme (those divide).
#[derive(Debug, Clone, Copy)]
struct Reciprocal {
    count: u32,
    /// ⌊2^40 / count⌋ + 1, or 0 when `count` is too large for the exact shortcut.
    multiplier: u64,
}

impl Reciprocal {
    fn of(count: u32) -> Reciprocal {
        let multiplier = if count <= 1 << 16 {
            (1u64 << 40) / u64::from(count) + 1
        } else {
            0
        };
        Reciprocal { count, multiplier }
    }

    /// (sum + count / 2) / count.
    fn rounded_quotient(self, sum: u32) -> u32 {
        let n = sum + self.count / 2;
        if self.multiplier == 0 {
            n / self.count
        } else {
            // n < 2^24 and count ≤ 2^16: the error of the multiplier stays below 1/count.
            ((u64::from(n) * self.multiplier) >> 40) as u32
        }
    }
}

/// Whether every pixel is the same colour: a black frame from a Play client, a window
/// that has not drawn, a capture the operating system blanked out.
pub fn is_uniform(rgba: &[u8]) -> bool {
    let mut pixels = rgba.chunks_exact(4);
    match pixels.next() {
        Some(first) => pixels.all(|p| p == first),
        None => true,
    }
}

/// Encodes RGBA8 pixels as a PNG, favouring speed over size: a screenshot is looked at
/// once, and the agent is waiting. fdeflate's fastest mode with the `Up` filter (the
/// pairing the png crate recommends for it) rather than trying every filter on every
/// row: measured on a 1920×1080 scene, 20 % faster for a file 5 % larger. An opaque image
/// (every screenshot: the plugin and the window capture give alpha 255) is written as RGB:
/// a quarter less to filter and compress, and a PNG about 15 % smaller to base64 and send.
pub fn encode_png(width: u32, height: u32, rgba: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    match opaque_rgb(rgba) {
        Some(rgb) => encode(width, height, &rgb, png::ColorType::Rgb),
        None => encode(width, height, rgba, png::ColorType::Rgba),
    }
}

/// The RGB of `rgba` when every pixel is opaque, else None (found at the first that is not).
fn opaque_rgb(rgba: &[u8]) -> Option<Vec<u8>> {
    let mut rgb = Vec::with_capacity(rgba.len() / 4 * 3);
    for pixel in rgba.chunks_exact(4) {
        if pixel[3] != 255 {
            return None;
        }
        rgb.extend_from_slice(&pixel[..3]);
    }
    Some(rgb)
}

fn encode(width: u32, height: u32, pixels: &[u8], color: png::ColorType) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::with_capacity(pixels.len() / 4);
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        encoder.set_filter(png::Filter::Up);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(pixels)?;
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
    fn an_opaque_image_is_written_as_rgb_with_the_same_colours() {
        let rgba: Vec<u8> = (0..4 * 3)
            .flat_map(|i| [(i * 7) as u8, (i * 11) as u8, (i * 13) as u8, 255])
            .collect();
        let png = encode_png(4, 3, &rgba).unwrap();
        let rgb: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(decode(&png), (4, 3, rgb));
        let reader = png::Decoder::new(std::io::Cursor::new(&png)).read_info().unwrap();
        assert_eq!(reader.info().color_type, png::ColorType::Rgb);
        // one translucent pixel keeps the alpha channel
        let mut translucent = rgba.clone();
        translucent[7] = 254;
        assert_eq!(decode(&encode_png(4, 3, &translucent).unwrap()), (4, 3, translucent));
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
    fn reciprocals_divide_exactly() {
        for count in (1..=300).chain([1000, 4095, 4096, 65_535, 65_536, 65_537, 1_000_000]) {
            let reciprocal = Reciprocal::of(count);
            let largest = count.saturating_mul(255);
            for sum in (0..=largest.min(5000)).chain(largest.saturating_sub(5000)..=largest) {
                assert_eq!(
                    reciprocal.rounded_quotient(sum),
                    (sum + count / 2) / count,
                    "{sum}/{count}"
                );
            }
        }
    }

    /// The scaler as first written, one box at a time: the fast one must agree with it.
    fn reference_fit_width(width: u32, height: u32, rgba: &[u8], max_width: u32) -> (u32, u32, Vec<u8>) {
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
                    for px in rgba[(y * w + x0) * 4..(y * w + x1) * 4].chunks_exact(4) {
                        for c in 0..4 {
                            sum[c] += u32::from(px[c]);
                        }
                    }
                }
                let count = ((y1 - y0) * (x1 - x0)) as u32;
                for c in 0..4 {
                    out[(ty * nw + tx) * 4 + c] = ((sum[c] + count / 2) / count) as u8;
                }
            }
        }
        (new_width, new_height, out)
    }

    #[test]
    fn scaling_matches_the_box_by_box_reference() {
        let mut seed = 12345u32;
        for (w, h, max) in [
            (64, 48, 40),
            (101, 37, 16),
            (300, 7, 299),
            (17, 300, 16),
            (1000, 3, 333),
            (99, 99, 98),
        ] {
            let rgba: Vec<u8> = (0..w * h * 4)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (seed >> 16) as u8
                })
                .collect();
            let expected = reference_fit_width(w, h, &rgba, max);
            assert_eq!(fit_width(w, h, rgba, max), expected, "{w}×{h} to {max}");
        }
    }

    #[test]
    fn uniform_means_every_pixel_alike() {
        assert!(is_uniform(&[0, 0, 0, 255, 0, 0, 0, 255]));
        assert!(!is_uniform(&[0, 0, 0, 255, 0, 0, 1, 255]));
        assert!(!is_uniform(&[9, 9, 9, 255, 9, 9, 9, 254]));
        assert!(is_uniform(&[]));
    }

    #[test]
    fn narrow_images_are_untouched() {
        let rgba = vec![1u8; 2 * 2 * 4];
        assert_eq!(fit_width(2, 2, rgba.clone(), 1280), (2, 2, rgba));
    }
}
