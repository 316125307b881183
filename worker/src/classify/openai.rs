//! TEMP
use moderation_shared::domain::Modality;
use super::*;
use crate::error::Failure;
#[derive(Debug, Clone)]
pub struct OpenAiSettings;
impl OpenAiSettings { pub fn from_env() -> Result<Self, moderation_shared::config::ConfigError> { Ok(Self) } }
pub struct OpenAiProvider;
impl OpenAiProvider {
    pub fn new(_: OpenAiSettings) -> Result<Self, std::io::Error> { Ok(Self) }
    pub async fn check_text(&self, _: TextContent<'_>, _: &Policy) -> Result<Verdict, Failure> { todo!() }
    pub async fn transcribe(&self, _: &Media) -> Result<String, Failure> { todo!() }
    pub async fn check_visual(&self, _: Modality, _: &Media, _: &Policy) -> Result<Verdict, Failure> { todo!() }
}
