//! The built-in models of the `local` provider (contract 10), with their real files: ignored
//! tiers run with `TEST_MODEL_DIR` pointing at a directory `scripts/models` prepared.

mod text;
