//! Text normalisation for blocklist matching, applied identically to terms and to content.
//!
//! Each character of the input becomes zero or more *letters* of a canonical alphabet:
//! - compatibility decomposition (the NFKD half of NFKC: fullwidth, ligatures, super- and
//!   subscripts become plain letters), then every combining mark is dropped (diacritics:
//!   `kïll` is `kill`), then lowercase;
//! - invisible and format characters (zero-width spaces and joiners, soft hyphens, bidi
//!   controls, variation selectors, the BOM, tag characters) are dropped without splitting a
//!   word;
//! - confusable Cyrillic and Greek letters (and a few Latin ones) become the Latin letter they
//!   look like;
//! - in a word that has letters, digits used as letters become them (`0`→o, `1`→i, `3`→e,
//!   `4`→a, `5`→s, `7`→t, `8`→b, `9`→g); `@`, `$`, `!` and `|` followed by a letter or digit
//!   become `a`, `s`, `i`, `l`. Numbers on their own stay numbers, and punctuation at the end
//!   of a word stays punctuation (`kill you!`);
//! - `i`, `l` and `1` are one letter, since each is written for the others;
//! - everything else that is not a letter or digit separates words, and words spelled out one
//!   letter at a time with one kind of separator (`k i l l`, `k.i.l.l`, `k-i-l-l`) are joined.
//!
//! Runs of a repeated letter are collapsed into one letter with a count, so `kiiiill` and
//! `kill` have the same letters; a term then matches where the content's run of each letter is
//! at least as long as the term's (`ass` does not match `as`, `kill` matches `kiiill`).

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// One letter of normalised text: a run of the same canonical letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Letter {
    /// The canonical letter, or `' '` between words.
    pub ch: char,
    /// How many times it was repeated (1 for a space).
    pub run: u32,
    /// Byte range in the original text this run came from.
    pub start: usize,
    /// End of that byte range.
    pub end: usize,
}

/// Normalised text: words of canonical letters separated by single spaces, with the way back
/// to the original bytes.
#[derive(Debug, Clone, Default)]
pub struct NormalisedText {
    letters: Vec<Letter>,
    /// The canonical letters as a string (what the automaton searches).
    collapsed: String,
    /// For each byte of `collapsed`, the index of its letter.
    letter_at: Vec<u32>,
}

impl NormalisedText {
    /// Normalises `text`.
    pub fn new(text: &str) -> Self {
        let tokens = tokens(text);
        let mut out = Builder::default();
        let joined = joined_spellings(text, &tokens);
        for (i, token) in tokens.iter().enumerate() {
            match token.kind {
                TokenKind::Word => {
                    if i > 0 && !joined[i] {
                        out.space(token.start);
                    }
                    out.word(text, token);
                }
                TokenKind::Gap => {}
            }
        }
        out.finish()
    }

    /// The runs of letters.
    pub fn letters(&self) -> &[Letter] {
        &self.letters
    }

    /// The canonical letters as one string (spaces between words).
    pub fn collapsed(&self) -> &str {
        &self.collapsed
    }

    /// The index of the letter that byte `offset` of [`Self::collapsed`] belongs to.
    pub fn letter_index(&self, offset: usize) -> usize {
        self.letter_at
            .get(offset)
            .map_or(self.letters.len(), |&i| i as usize)
    }

    /// Whether it holds no letters.
    pub fn is_empty(&self) -> bool {
        self.letters.is_empty()
    }
}

#[derive(Default)]
struct Builder {
    letters: Vec<Letter>,
}

impl Builder {
    fn space(&mut self, at: usize) {
        if self.letters.last().is_some_and(|l| l.ch != ' ') {
            self.letters.push(Letter {
                ch: ' ',
                run: 1,
                start: at,
                end: at,
            });
        }
    }

    fn push(&mut self, ch: char, start: usize, end: usize) {
        match self.letters.last_mut() {
            Some(last) if last.ch == ch && ch != ' ' => {
                last.run += 1;
                last.end = end;
            }
            _ => self.letters.push(Letter {
                ch,
                run: 1,
                start,
                end,
            }),
        }
    }

    /// Appends the letters of one word token.
    fn word(&mut self, text: &str, token: &Token) {
        let slice = &text[token.start..token.end];
        let has_letter = token.has_letter;
        let mut chars = slice.char_indices().peekable();
        while let Some((offset, c)) = chars.next() {
            let start = token.start + offset;
            let end = start + c.len_utf8();
            let next_is_word = chars.peek().is_some_and(|&(_, n)| is_word_char(n));
            if let Some(mapped) = swap(c, has_letter, next_is_word) {
                self.push(mapped, start, end);
                continue;
            }
            fold(c, |folded| self.push(folded, start, end));
        }
    }

    fn finish(mut self) -> NormalisedText {
        if self.letters.last().is_some_and(|l| l.ch == ' ') {
            self.letters.pop();
        }
        let mut collapsed = String::with_capacity(self.letters.len());
        let mut letter_at = Vec::with_capacity(self.letters.len());
        for (i, letter) in self.letters.iter().enumerate() {
            collapsed.push(letter.ch);
            letter_at.extend(std::iter::repeat_n(i as u32, letter.ch.len_utf8()));
        }
        NormalisedText {
            letters: self.letters,
            collapsed,
            letter_at,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    /// Letters, digits, invisible characters and symbols used as letters.
    Word,
    /// Separators.
    Gap,
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokenKind,
    start: usize,
    end: usize,
    /// Letters in the token (after folding), for words.
    letters: usize,
    /// Whether the word has a real letter, so its digits may stand for letters.
    has_letter: bool,
}

/// Splits `text` into words and gaps. Invisible characters belong to the word around them;
/// `@ $ ! |` belong to a word when a letter or digit follows them.
fn tokens(text: &str) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let next_is_word = chars.peek().is_some_and(|&(_, n)| is_word_char(n));
        let kind = if is_word_char(c) || is_invisible(c) || (is_symbol_letter(c) && next_is_word) {
            TokenKind::Word
        } else {
            TokenKind::Gap
        };
        let end = start + c.len_utf8();
        let letter = c.is_alphabetic();
        match tokens.last_mut() {
            Some(last) if last.kind == kind => {
                last.end = end;
                last.letters += usize::from(!is_invisible(c));
                last.has_letter |= letter;
            }
            _ => tokens.push(Token {
                kind,
                start,
                end,
                letters: usize::from(!is_invisible(c)),
                has_letter: letter,
            }),
        }
    }
    tokens
}

/// For each token, whether it continues a word spelled one letter at a time: at least three
/// one-letter words in a row separated by gaps of one and the same character.
fn joined_spellings(text: &str, tokens: &[Token]) -> Vec<bool> {
    let mut joined = vec![false; tokens.len()];
    let single = |t: &Token| t.kind == TokenKind::Word && t.letters == 1;
    let mut i = 0;
    while i < tokens.len() {
        if !single(&tokens[i]) {
            i += 1;
            continue;
        }
        // Extend over `letter gap letter gap letter ...` with identical one-character gaps.
        let mut j = i;
        let mut separator: Option<&str> = None;
        while j + 2 < tokens.len() && single(&tokens[j + 2]) {
            let gap = &text[tokens[j + 1].start..tokens[j + 1].end];
            if gap.chars().count() != 1 || separator.is_some_and(|s| s != gap) {
                break;
            }
            separator = Some(gap);
            j += 2;
        }
        let letters = (j - i) / 2 + 1;
        if letters >= 3 {
            for k in (i + 2..=j).step_by(2) {
                joined[k] = true;
            }
        }
        i = j + 1;
    }
    joined
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c)
}

fn is_symbol_letter(c: char) -> bool {
    matches!(c, '@' | '$' | '!' | '|')
}

/// Zero-width and format characters, bidi controls, variation selectors, BOM, tags.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}')
}

/// A digit or symbol standing for a letter, as its canonical letter.
fn swap(c: char, word_has_letter: bool, next_is_word: bool) -> Option<char> {
    let letter = match c {
        '0' => 'o',
        '1' => 'i',
        '3' => 'e',
        '4' => 'a',
        '5' => 's',
        '7' => 't',
        '8' => 'b',
        '9' => 'g',
        '@' if next_is_word => return Some('a'),
        '$' if next_is_word => return Some('s'),
        '!' | '|' if next_is_word => return Some('i'),
        _ => return None,
    };
    word_has_letter.then_some(letter)
}

/// Folds one character into canonical letters (none for invisible characters and marks).
fn fold(c: char, mut emit: impl FnMut(char)) {
    if c.is_ascii() {
        if c.is_ascii_alphanumeric() {
            emit(canonical(c.to_ascii_lowercase()));
        }
        return;
    }
    if is_invisible(c) {
        return;
    }
    decompose_compatible(c, |d| {
        if is_combining_mark(d) || is_invisible(d) {
            return;
        }
        for lower in d.to_lowercase() {
            if let Some(latin) = confusable(lower) {
                emit(canonical(latin));
            } else if lower == 'ß' {
                emit('s');
                emit('s');
            } else if lower.is_alphanumeric() {
                emit(canonical(lower));
            }
        }
    });
}

/// `i` and `l` are written for each other (and `1` for both, see [`swap`]): one letter.
fn canonical(c: char) -> char {
    match c {
        'l' => 'i',
        other => other,
    }
}

/// The Latin letter a Cyrillic, Greek or special Latin letter is mistaken for.
fn confusable(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic
        'а' => 'a',
        'в' => 'b',
        'е' | 'ё' | 'є' => 'e',
        'з' => '3',
        'і' | 'ї' => 'i',
        'ј' => 'j',
        'к' => 'k',
        'м' => 'm',
        'н' => 'h',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'т' => 't',
        'у' => 'y',
        'х' => 'x',
        'ѕ' => 's',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'ь' => 'b',
        // Greek
        'α' => 'a',
        'β' => 'b',
        'γ' => 'y',
        'ε' => 'e',
        'η' => 'n',
        'ι' => 'i',
        'κ' => 'k',
        'μ' => 'u',
        'ν' => 'v',
        'ο' => 'o',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        'ω' => 'w',
        // Latin letters without a decomposition
        'ı' => 'i',
        'ł' => 'l',
        'ø' => 'o',
        'đ' => 'd',
        'ħ' => 'h',
        'ŧ' => 't',
        'ɡ' => 'g',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        NormalisedText::new(s).collapsed().to_owned()
    }

    #[test]
    fn plain_words_are_lowercased_and_separated_by_one_space() {
        assert_eq!(norm("  Hello,   World!! "), "heio worid");
    }

    #[test]
    fn disguises_normalise_to_the_same_letters() {
        let plain = norm("kill");
        for variant in [
            "KILL",
            "ｋｉｌｌ",
            "k\u{200B}ill",
            "ki\u{00AD}ll",
            "kïll",
            "кill",
            "k1ll",
            "kiiiill",
            "k i l l",
            "k.i.l.l",
            "k-i-l-l",
            "k!ll",
            "k|ll",
        ] {
            assert_eq!(norm(variant), plain, "{variant}");
        }
    }

    #[test]
    fn numbers_on_their_own_stay_numbers() {
        assert_eq!(norm("call 911 now"), "cai 91 now");
        assert_eq!(norm("2024"), "2024");
    }

    #[test]
    fn punctuation_at_the_end_of_a_word_is_a_separator() {
        assert_eq!(norm("kill you!"), "ki you");
        assert_eq!(norm("@ss"), norm("ass"));
        assert_eq!(norm("$hit"), norm("shit"));
    }

    #[test]
    fn runs_keep_their_length() {
        let text = NormalisedText::new("kiiill");
        let runs: Vec<u32> = text.letters().iter().map(|l| l.run).collect();
        assert_eq!(text.collapsed(), "ki");
        assert_eq!(runs, vec![1, 5]);
    }

    #[test]
    fn letters_point_back_at_the_original_bytes() {
        let original = "Say ｋｉｌｌ now";
        let text = NormalisedText::new(original);
        let k = text.letters().iter().find(|l| l.ch == 'k').unwrap();
        let i = text.letters().iter().find(|l| l.ch == 'i').unwrap();
        assert_eq!(&original[k.start..i.end], "ｋｉｌｌ");
    }

    #[test]
    fn empty_and_symbol_only_text_is_empty() {
        assert!(NormalisedText::new("").is_empty());
        assert!(NormalisedText::new(" ... !!! ").is_empty());
    }
}
