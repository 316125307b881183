//! The built-in model tiers (contract 10), `#[ignore]`d in the ordinary run: they need
//! `scripts/models` (`TEST_MODEL_DIR`) and the reference venv (`MODEL_TESTS_PYTHON`).

mod nsfw;
mod policy;
mod text;
mod whisper;
