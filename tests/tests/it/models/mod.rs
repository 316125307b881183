//! The model tiers (`#[ignore]`d; they need `scripts/models`): each built-in model on real
//! input, in the library and through a real worker.

mod whisper;
