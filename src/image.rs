//! Screenshot pixels to a PNG: scaled down to a maximum width and encoded, row by row.
//!
//! A 1920×1080 capture is 8 MB of RGBA. Making whole-image copies of it (the scaled image,
//! then its RGB, then the compressed stream, then the PNG around it) cost as much as the
//! encoding itself: each is a fresh allocation whose every page faults in on first touch.
//! So the PNG is written as a stream: each output row is averaged from the source rows it
//! covers into one row buffer, then filtered and compressed before the next is made. The
//! source is read once, in order; the only allocation that grows with the image is the PNG.

use std::io::Write as _;

/// The PNG of an image, and its size once fitted to the maximum width.
#[derive(Debug)]
pub struct Png {
    pub width: u32,
    pub height: u32,
    pub bytes: Vec<u8>,
}

/// IDAT chunk size: large enough that chunk headers are noise, small enough to stay in cache.
const CHUNK_BYTES: usize = 256 * 1024;

/// Encodes `rgba` (row-major, top-left first, `width`×`height`) as a PNG at most
/// `max_width` wide, keeping the aspect ratio. Wider images are scaled down by averaging
/// the source pixels each target pixel covers. An opaque image (every screenshot: the
/// plugin and the window capture give alpha 255) is written as RGB: a quarter less to
/// filter and compress, and a PNG about 15 % smaller to base64 and send. Speed is
/// favoured over size: a screenshot is looked at once, and the agent is waiting. fdeflate's
/// fastest mode with the `Up` filter (the pairing the png crate recommends for it) rather
/// than trying every filter on every row: measured on a 1920×1080 scene, 20 % faster for a
/// file 5 % larger.
///
/// `rgba` must hold exactly `width * height * 4` bytes (the caller checks what a peer sent).
pub fn encode_png(width: u32, height: u32, rgba: &[u8], max_width: u32) -> Result<Png, png::EncodingError> {
    debug_assert_eq!(rgba.len() as u64, u64::from(width) * u64::from(height) * 4);
    let (new_width, new_height) = fitted_size(width, height, max_width);
    let opaque = rgba.chunks_exact(4).all(|pixel| pixel[3] == 255);
    let channels = if opaque { 3 } else { 4 };
    let row_bytes = new_width as usize * channels;
    // Capacity that is never written costs no memory: only touched pages are mapped.
    let mut bytes = Vec::with_capacity(row_bytes * new_height as usize + 1024);
    {
        let mut encoder = png::Encoder::new(&mut bytes, new_width, new_height);
        encoder.set_color(if opaque {
            png::ColorType::Rgb
        } else {
            png::ColorType::Rgba
        });
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        encoder.set_filter(png::Filter::Up);
        let mut writer = encoder.write_header()?;
        let mut stream = writer.stream_writer_with_size(CHUNK_BYTES)?;
        let mut row = vec![0u8; row_bytes];
        if (new_width, new_height) == (width, height) {
            for source in rgba.chunks_exact(width as usize * 4) {
                if opaque {
                    for (rgb, pixel) in row.chunks_exact_mut(3).zip(source.chunks_exact(4)) {
                        rgb.copy_from_slice(&pixel[..3]);
                    }
                    stream.write_all(&row)?;
                } else {
                    stream.write_all(source)?;
                }
            }
        } else {
            let mut scaler = BoxScaler::new(width, height, new_width, new_height);
            for target_row in 0..new_height as usize {
                scaler.row(rgba, target_row, channels, &mut row);
                stream.write_all(&row)?;
            }
        }
        stream.finish()?;
        writer.finish()?;
    }
    Ok(Png {
        width: new_width,
        height: new_height,
        bytes,
    })
}

/// The size of a `width`×`height` image fitted to `max_width`: unchanged when it is
/// narrow enough, else `max_width` wide and as tall as keeps the aspect (at least 1).
fn fitted_size(width: u32, height: u32, max_width: u32) -> (u32, u32) {
    if width <= max_width || width == 0 || height == 0 {
        return (width, height);
    }
    let new_width = max_width.max(1);
    let new_height =
        ((u64::from(height) * u64::from(new_width) + u64::from(width) / 2) / u64::from(width)).max(1) as u32;
    (new_width, new_height)
}

/// Scales down by box averaging, one target row at a time. The boxes of source pixels
/// the target pixels cover tile the source exactly, so each source pixel is added once.
struct BoxScaler {
    width: usize,
    height: usize,
    new_height: usize,
    /// First source column and number of columns of each target column's box.
    columns: Vec<(usize, usize)>,
    /// Each source column's channels summed over the target row's source rows.
    column_sums: Vec<u32>,
    /// Each target pixel's channels summed over its box.
    sums: Vec<[u32; 4]>,
    /// Box heights take one or two values, so the divisors of each are worked out once.
    reciprocals: Vec<(usize, Vec<Reciprocal>)>,
}

impl BoxScaler {
    fn new(width: u32, height: u32, new_width: u32, new_height: u32) -> BoxScaler {
        let (w, nw) = (width as usize, new_width as usize);
        let columns = (0..nw)
            .map(|tx| {
                let x0 = tx * w / nw;
                let x1 = ((tx + 1) * w / nw).max(x0 + 1);
                (x0, x1 - x0)
            })
            .collect();
        BoxScaler {
            width: w,
            height: height as usize,
            new_height: new_height as usize,
            columns,
            column_sums: vec![0; w * 4],
            sums: vec![[0; 4]; nw],
            reciprocals: Vec::new(),
        }
    }

    /// Writes target row `target_row` into `out` (`channels` bytes a pixel: 3 drops alpha).
    fn row(&mut self, rgba: &[u8], target_row: usize, channels: usize, out: &mut [u8]) {
        let (w, h, nh) = (self.width, self.height, self.new_height);
        let y0 = target_row * h / nh;
        let y1 = ((target_row + 1) * h / nh).max(y0 + 1);
        // Down the columns first (each source row added to one row of sums: a loop the
        // compiler vectorizes), then across each target pixel's box of columns.
        self.column_sums.fill(0);
        for source in rgba[y0 * w * 4..y1 * w * 4].chunks_exact(w * 4) {
            for (sum, &byte) in self.column_sums.iter_mut().zip(source) {
                *sum += u32::from(byte);
            }
        }
        let (column_pixels, _) = self.column_sums.as_chunks::<4>();
        for (sum, &(x0, len)) in self.sums.iter_mut().zip(&self.columns) {
            let mut total = [0u32; 4];
            for pixel in &column_pixels[x0..x0 + len] {
                for c in 0..4 {
                    total[c] += pixel[c];
                }
            }
            *sum = total;
        }
        let rows = y1 - y0;
        let divisors = match self.reciprocals.iter().position(|(r, _)| *r == rows) {
            Some(i) => &self.reciprocals[i].1,
            None => {
                let table = self
                    .columns
                    .iter()
                    .map(|&(_, columns)| Reciprocal::of((rows * columns) as u32))
                    .collect();
                self.reciprocals.push((rows, table));
                &self.reciprocals[self.reciprocals.len() - 1].1
            }
        };
        for ((pixel, sum), divisor) in out.chunks_exact_mut(channels).zip(&self.sums).zip(divisors) {
            for (channel, total) in pixel.iter_mut().zip(sum) {
                *channel = divisor.rounded_quotient(*total) as u8;
            }
        }
    }
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
        let png = encode_png(4, 3, &rgba, 1280).unwrap();
        assert_eq!((png.width, png.height), (4, 3));
        assert_eq!(decode(&png.bytes), (4, 3, rgba));
    }

    #[test]
    fn an_opaque_image_is_written_as_rgb_with_the_same_colours() {
        let rgba: Vec<u8> = (0..4 * 3)
            .flat_map(|i| [(i * 7) as u8, (i * 11) as u8, (i * 13) as u8, 255])
            .collect();
        let png = encode_png(4, 3, &rgba, 1280).unwrap().bytes;
        let rgb: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(decode(&png), (4, 3, rgb));
        let reader = png::Decoder::new(std::io::Cursor::new(&png)).read_info().unwrap();
        assert_eq!(reader.info().color_type, png::ColorType::Rgb);
        // one translucent pixel keeps the alpha channel
        let mut translucent = rgba.clone();
        translucent[7] = 254;
        assert_eq!(
            decode(&encode_png(4, 3, &translucent, 1280).unwrap().bytes),
            (4, 3, translucent)
        );
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
        let png = encode_png(8, 4, &rgba, 4).unwrap();
        assert_eq!((png.width, png.height), (4, 2));
        let (_, _, rgb) = decode(&png.bytes);
        assert_eq!(&rgb[0..3], &[255, 0, 0]);
        assert_eq!(&rgb[9..12], &[0, 0, 255]);
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
            let png = encode_png(w, h, &rgba, max).unwrap();
            assert_eq!(decode(&png.bytes), expected, "{w}×{h} to {max}");
            // and opaque, written as RGB: the same colours without their alpha
            let opaque: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
            let (ew, eh, expected) = reference_fit_width(w, h, &opaque, max);
            let rgb: Vec<u8> = expected.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
            assert_eq!(
                decode(&encode_png(w, h, &opaque, max).unwrap().bytes),
                (ew, eh, rgb),
                "{w}×{h} to {max}, opaque"
            );
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
        let rgba: Vec<u8> = (0..2 * 2 * 4).map(|i| i as u8 * 9).collect();
        assert_eq!(decode(&encode_png(2, 2, &rgba, 2).unwrap().bytes), (2, 2, rgba));
    }

    #[test]
    fn an_image_taller_than_one_idat_chunk_round_trips() {
        // 700×400 of RGB noise compresses to more than one 256 KiB IDAT chunk.
        let mut seed = 7u32;
        let rgba: Vec<u8> = (0..700 * 400)
            .flat_map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let [a, b, c, _] = seed.to_le_bytes();
                [a, b, c, 255]
            })
            .collect();
        let png = encode_png(700, 400, &rgba, 1280).unwrap();
        assert!(png.bytes.len() > CHUNK_BYTES, "{} bytes", png.bytes.len());
        let rgb: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(decode(&png.bytes), (700, 400, rgb));
    }
}
