//! A job's status, its progress stage, and why it failed.

word_enum!(
    /// Job status: `queued → processing → completed | failed`; terminal states never change.
    JobStatus, UnknownJobStatus, "job status" {
        /// Waiting for a worker.
        Queued => "queued",
        /// A worker holds it.
        Processing => "processing",
        /// Decided.
        Completed => "completed",
        /// Could not be decided.
        Failed => "failed",
    }
);

word_enum!(
    /// Where a job is in its processing (the progress `stage` of contract section 3).
    JobStage, UnknownJobStage, "job stage" {
        /// Waiting for a worker.
        Queued => "queued",
        /// Downloading its media.
        Fetching => "fetching",
        /// Turning its audio into text.
        Transcribing => "transcribing",
        /// Asking the classifier.
        Classifying => "classifying",
        /// Decided.
        Done => "done",
        /// Could not be decided.
        Failed => "failed",
    }
);

word_enum!(
    /// Why a job failed: the contract's error codes.
    FailureCode, UnknownFailureCode, "failure code" {
        /// The media could not be downloaded.
        MediaUnreachable => "MEDIA_UNREACHABLE",
        /// The media is over the size limit.
        MediaTooLarge => "MEDIA_TOO_LARGE",
        /// The media is over the length limit.
        MediaTooLong => "MEDIA_TOO_LONG",
        /// The media's format cannot be read.
        MediaUnsupported => "MEDIA_UNSUPPORTED",
        /// The media URL leads somewhere it may not (not public, not http(s)).
        UrlNotAllowed => "URL_NOT_ALLOWED",
        /// The classifier gave no verdict.
        ClassifierUnavailable => "CLASSIFIER_UNAVAILABLE",
        /// The job's content was erased before it was classified.
        ContentErased => "CONTENT_ERASED",
        /// The service failed.
        Internal => "INTERNAL",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_word_is_an_error_naming_it() {
        let err = "paused".parse::<JobStatus>().unwrap_err();
        assert_eq!(err.to_string(), "unknown job status \"paused\"");
        assert!("media_unreachable".parse::<FailureCode>().is_err());
    }

    #[test]
    fn serde_uses_the_wire_names() {
        assert_eq!(
            serde_json::to_value(FailureCode::ClassifierUnavailable).unwrap(),
            "CLASSIFIER_UNAVAILABLE"
        );
        assert_eq!(serde_json::to_value(JobStage::Done).unwrap(), "done");
    }
}
