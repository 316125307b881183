//! Loading Whisper as the examples that transcribe do: the model `APP_SPEECH_MODEL` names
//! (`base`, the default, or `tiny.en`), its linear layers multiplying as the worker's do on
//! this CPU, or as `WHISPER_PRODUCTS` says (`f32` or `int8`, to compare the two on one
//! machine; `int8` only where the CPU multiplies int8 exactly: elsewhere rten-gemm's kernel may
//! saturate).

use std::path::Path;

use anyhow::Context;
use moderation_worker::models::{
    whisper::{SpeechModel, Whisper},
    Products,
};

/// Whisper from the model directory `dir`, with the model's name; says on standard error how
/// it multiplies.
pub fn load(dir: &Path) -> anyhow::Result<(Whisper, &'static str)> {
    let model = match std::env::var("APP_SPEECH_MODEL") {
        Ok(name) => SpeechModel::parse(&name).context("APP_SPEECH_MODEL: base or tiny.en")?,
        Err(_) => SpeechModel::default(),
    };
    let products = match std::env::var("WHISPER_PRODUCTS").as_deref() {
        Ok("f32") => Products::F32,
        Ok("int8") => Products::Int8,
        Ok(other) => anyhow::bail!("WHISPER_PRODUCTS: f32 or int8, not {other}"),
        Err(_) => Products::for_this_cpu(),
    };
    eprintln!(
        "Whisper {}, linear layers in {}",
        model.name(),
        products.name()
    );
    Ok((Whisper::load_with(dir, model, products)?, model.name()))
}
