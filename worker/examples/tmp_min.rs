use moderation_worker::models::nsfw::NsfwModel;
use std::{path::Path, time::Instant};
fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = NsfwModel::load(Path::new(&args[0]))?;
    let img = image::RgbImage::from_fn(256, 256, |x, y| {
        image::Rgb([(x * 3 + y) as u8, (y * 5) as u8, (x ^ y) as u8])
    });
    let mut best = f64::MAX;
    for _ in 0..15 {
        let t = Instant::now();
        for _ in 0..40 {
            model.score(&img)?;
        }
        best = best.min(t.elapsed().as_secs_f64() / 40.0);
    }
    println!("{:.3} ms", best * 1e3);
    Ok(())
}
