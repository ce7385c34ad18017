//! User input quoted in error messages: at most its first few dozen characters, so that a 130,000-character
//! argument still gets a one-line error of a reasonable length.

/// Characters of an argument quoted in an error.
pub const MAX_QUOTED: usize = 40;

/// An error as one line: the lines of its chain (a regex error, a clap usage error) joined, any huge
/// word (an argument quoted whole) cut to its first characters.
pub fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    shorten_words(&line)
}

/// Words longer than this in an error line are shortened by [`shorten_words`].
pub const MAX_WORD: usize = 256;

/// `s` itself if it has at most [`MAX_QUOTED`] characters, else its first ones, `...` and its length.
pub fn excerpt(s: &str) -> String {
    let n = s.chars().count();
    if n <= MAX_QUOTED {
        return s.to_owned();
    }
    let head: String = s.chars().take(MAX_QUOTED).collect();
    format!("{head}... ({n} characters)")
}

/// `line` with each whitespace-separated word longer than [`MAX_WORD`] characters replaced by its
/// [`excerpt`] (a last resort for messages that quote an argument whole, such as clap's).
pub fn shorten_words(line: &str) -> String {
    if line.len() <= MAX_WORD {
        return line.to_owned();
    }
    line.split(' ')
        .map(|w| {
            if w.chars().count() > MAX_WORD {
                excerpt(w)
            } else {
                w.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_input_is_cut() {
        assert_eq!(excerpt("1,2,3"), "1,2,3");
        let long = "x".repeat(1000);
        let cut = excerpt(&long);
        assert!(cut.starts_with(&"x".repeat(MAX_QUOTED)) && cut.ends_with("(1000 characters)"));
        let line = format!("error: token {long} is bad");
        assert_eq!(shorten_words(&line), format!("error: token {cut} is bad"));
    }
}
