//! The language of a text (contract 18), detected by `whatlang` (trigram statistics over 69
//! languages and the script of the letters; no model files), and which text model judges it:
//! the English one (MiniLM with its trained head), the multilingual one (the multilingual
//! encoder with its own head) or none (a language the text models do not cover: the lists
//! alone judge it).
//!
//! Detection on short texts is often unsure between neighbours (Spanish and Catalan,
//! Portuguese and Galician, Russian and Ukrainian), so the route is chosen among the covered
//! languages only: a text leaves the models only when its script is one the multilingual
//! encoder was not trained on (Ethiopic, Devanagari, Hebrew, ...), or when whatlang is sure
//! of a language outside [`COVERED`].

use std::sync::LazyLock;

use whatlang::{Detector, Lang, Script};

use crate::classify::TextContent;

/// The languages the multilingual text model covers (its encoder's 16, Chinese counted once),
/// as ISO 639-1 codes.
pub const COVERED: [&str; 15] = [
    "ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh",
];

/// The scripts the multilingual encoder was trained on.
const COVERED_SCRIPTS: [Script; 8] = [
    Script::Latin,
    Script::Cyrillic,
    Script::Arabic,
    Script::Mandarin,
    Script::Hiragana,
    Script::Katakana,
    Script::Hangul,
    Script::Thai,
];

/// whatlang's languages (ISO 639-3) with their ISO 639-1 codes.
const CODES: [(&str, &str); 69] = [
    ("afr", "af"),
    ("aka", "ak"),
    ("amh", "am"),
    ("ara", "ar"),
    ("aze", "az"),
    ("bel", "be"),
    ("ben", "bn"),
    ("bul", "bg"),
    ("cat", "ca"),
    ("ces", "cs"),
    ("cmn", "zh"),
    ("dan", "da"),
    ("deu", "de"),
    ("ell", "el"),
    ("eng", "en"),
    ("epo", "eo"),
    ("est", "et"),
    ("fin", "fi"),
    ("fra", "fr"),
    ("guj", "gu"),
    ("heb", "he"),
    ("hin", "hi"),
    ("hrv", "hr"),
    ("hun", "hu"),
    ("hye", "hy"),
    ("ind", "id"),
    ("ita", "it"),
    ("jav", "jv"),
    ("jpn", "ja"),
    ("kan", "kn"),
    ("kat", "ka"),
    ("khm", "km"),
    ("kor", "ko"),
    ("lat", "la"),
    ("lav", "lv"),
    ("lit", "lt"),
    ("mal", "ml"),
    ("mar", "mr"),
    ("mkd", "mk"),
    ("mya", "my"),
    ("nep", "ne"),
    ("nld", "nl"),
    ("nob", "nb"),
    ("ori", "or"),
    ("pan", "pa"),
    ("pes", "fa"),
    ("pol", "pl"),
    ("por", "pt"),
    ("ron", "ro"),
    ("rus", "ru"),
    ("sin", "si"),
    ("slk", "sk"),
    ("slv", "sl"),
    ("sna", "sn"),
    ("spa", "es"),
    ("srp", "sr"),
    ("swe", "sv"),
    ("tam", "ta"),
    ("tel", "te"),
    ("tgl", "tl"),
    ("tha", "th"),
    ("tuk", "tk"),
    ("tur", "tr"),
    ("ukr", "uk"),
    ("urd", "ur"),
    ("uzb", "uz"),
    ("vie", "vi"),
    ("yid", "yi"),
    ("zul", "zu"),
];

/// Which text model judges a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// English (or no language detected): MiniLM and its head.
    English,
    /// Another covered language: the multilingual encoder and its head.
    Multilingual,
    /// A language or script the text models do not cover: the lists alone.
    Uncovered,
}

/// What was detected of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detected {
    /// The language, ISO 639-1; `None` when none was detected (no letters, too little text).
    pub language: Option<&'static str>,
    /// The model that judges it.
    pub route: Route,
}

/// The ISO 639-1 code of a whatlang language.
pub fn iso_639_1(lang: Lang) -> Option<&'static str> {
    let code = lang.code();
    CODES
        .iter()
        .find(|(three, _)| *three == code)
        .map(|(_, two)| *two)
}

/// Whether the text models cover the language `code` (ISO 639-1).
pub fn is_covered(code: &str) -> bool {
    COVERED.contains(&code)
}

/// Detects the language of `text` and chooses its model.
pub fn detect(text: &str) -> Detected {
    let Some(info) = whatlang::detect(text) else {
        return Detected {
            language: None,
            route: Route::English,
        };
    };
    let detected = iso_639_1(info.lang());
    if !COVERED_SCRIPTS.contains(&info.script()) {
        return Detected {
            language: detected,
            route: Route::Uncovered,
        };
    }
    let language = match detected {
        // whatlang scores each language on its own (the share of the text's letters its
        // alphabet has, the distance of its trigrams), so the best covered language of a text
        // is the best of all when that one is covered: no second detection for it.
        Some(code) if is_covered(code) => Some(code),
        Some(code) if info.is_reliable() => {
            return Detected {
                language: Some(code),
                route: Route::Uncovered,
            };
        }
        // Among the covered languages only: an unsure guess outside them is most often a
        // covered neighbour.
        _ => COVERED_DETECTOR
            .detect_lang(text)
            .and_then(iso_639_1)
            .or(detected),
    };
    let route = match language {
        None | Some("en") => Route::English,
        Some(_) => Route::Multilingual,
    };
    Detected { language, route }
}

/// Detects the language of a prompt or a chat (its messages together).
pub fn of_content(content: TextContent<'_>) -> Detected {
    match content.messages {
        Some(messages) => {
            let joined: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
            detect(&joined.join("\n"))
        }
        None => detect(content.text),
    }
}

/// whatlang's detector among the languages of [`COVERED`] only.
static COVERED_DETECTOR: LazyLock<Detector> =
    LazyLock::new(|| Detector::with_allowlist(covered_langs()));

/// whatlang's languages among [`COVERED`].
fn covered_langs() -> Vec<Lang> {
    Lang::all()
        .iter()
        .copied()
        .filter(|lang| iso_639_1(*lang).is_some_and(is_covered))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_whatlang_language_has_an_iso_639_1_code_and_every_covered_one_is_detectable() {
        for lang in Lang::all() {
            assert!(iso_639_1(*lang).is_some(), "{lang:?}");
        }
        assert_eq!(covered_langs().len(), COVERED.len());
    }

    #[test]
    fn texts_in_covered_languages_go_to_their_model_with_their_language() {
        let cases = [
            (
                "Could you move our call to Thursday morning, please?",
                "en",
                Route::English,
            ),
            (
                "Ich weiß, wo du wohnst, und ich werde dich finden.",
                "de",
                Route::Multilingual,
            ),
            (
                "Te voy a romper la cara cuando salgas del trabajo.",
                "es",
                Route::Multilingual,
            ),
            (
                "Je ne supporte plus mes voisins, ils font du bruit toute la nuit.",
                "fr",
                Route::Multilingual,
            ),
            (
                "Я знаю, где ты живёшь, и скоро приду.",
                "ru",
                Route::Multilingual,
            ),
            (
                "明日の会議は午後三時からに変更になりました。",
                "ja",
                Route::Multilingual,
            ),
            (
                "오늘 저녁에 같이 영화 보러 갈래요?",
                "ko",
                Route::Multilingual,
            ),
            (
                "我明天要去北京出差，下周一回来。",
                "zh",
                Route::Multilingual,
            ),
            ("سأجدك وأجعلك تندم على ما فعلت.", "ar", Route::Multilingual),
            ("พรุ่งนี้ฉันจะไปตลาดกับแม่", "th", Route::Multilingual),
        ];
        for (text, language, route) in cases {
            let detected = detect(text);

            assert_eq!(detected.language, Some(language), "{text}");
            assert_eq!(detected.route, route, "{text}");
        }
    }

    #[test]
    fn an_uncovered_script_is_left_to_the_lists_with_its_language() {
        let amharic = detect("ሰላም ነው? ዛሬ ስራ በጣም ብዙ ነበር፣ ነገ እንገናኝ።");
        let hindi = detect("मैं कल सुबह बाज़ार जाऊँगा और सब्ज़ियाँ खरीदूँगा।");

        assert_eq!(
            amharic,
            Detected {
                language: Some("am"),
                route: Route::Uncovered
            }
        );
        assert_eq!(
            hindi,
            Detected {
                language: Some("hi"),
                route: Route::Uncovered
            }
        );
    }

    #[test]
    fn a_text_without_letters_has_no_language_and_goes_to_the_english_model() {
        for text in ["", "12345 678", "!!! ???"] {
            assert_eq!(
                detect(text),
                Detected {
                    language: None,
                    route: Route::English
                },
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_text_whose_best_language_is_covered_keeps_it_among_the_covered_ones() {
        // What spares `detect` its second detection: over every text of the evaluation corpora
        // that whatlang gives a covered language, detecting among the covered languages only
        // gives that language again.
        fn texts(dir: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    texts(&path, out);
                } else if path.extension().is_some_and(|e| e == "tsv") {
                    let lines = std::fs::read_to_string(&path).unwrap();
                    out.extend(
                        lines
                            .lines()
                            .filter(|line| !line.starts_with('#'))
                            .filter_map(|line| line.split('\t').next_back().map(str::to_owned)),
                    );
                }
            }
        }
        let mut corpus = Vec::new();
        texts(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../eval/text"),
            &mut corpus,
        );
        let mut checked = 0;
        for text in &corpus {
            let Some(best) = whatlang::detect(text).and_then(|info| iso_639_1(info.lang())) else {
                continue;
            };
            if is_covered(best) {
                let among_covered = COVERED_DETECTOR.detect_lang(text).and_then(iso_639_1);
                assert_eq!(among_covered, Some(best), "{text}");
                checked += 1;
            }
        }
        assert!(checked > 4_000, "{checked} of {} texts", corpus.len());
    }
}
