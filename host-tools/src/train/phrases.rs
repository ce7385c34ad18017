//! English text as bytes for the byte-level model: training text made of random common words, and
//! held-out sentences it never sees, cut into "prefix + phrase repeated" sequences.

use rand::seq::IndexedRandom;
use rand::Rng;

use super::sequence::Sequence;

/// Shortest repeated phrase, in bytes.
pub const MIN_PHRASE: usize = 8;

/// Words of the training text (random word strings: English spelling, no fixed sentences).
const WORDS: &str = "the of and to in is was that for it with as his on be at by this had not are but from \
or have an they which one you were her all she there would their we him been has when who will more no if \
out so said what up its about into than them can only other new some could time these two may then do first \
any my now such like our over man me even most made after also did many before must through back years where \
much your way well down should because each just those people how too little state good very make world still \
own see men work long get here between both life being under never day same another know while last might us \
great old year off come since against go came right used take three small large house light water river \
stone garden window table paper letter morning evening summer winter green blue red white black bright quiet \
slow quick warm cold early late open close read write speak listen carry follow begin finish answer question \
number music story city country market bridge road train ship island mountain forest field flower tree bird \
horse village school teacher student friend mother father child brother sister doctor farmer painter sailor \
kitchen bread cheese apple coffee salt sugar milk fire wind rain snow cloud star moon sun north south east west";

/// Held-out English sentences: never in the training text.
pub const HELD_OUT: &str =
    "A small boat drifted past the harbour lights while the fishermen mended their nets. \
She kept every letter her grandmother had written in a tin box under the stairs. \
The old clock in the hallway struck nine, and nobody in the house moved. \
After the storm the children ran down to the beach to look for shells and driftwood. \
He painted the fence a pale shade of yellow that faded by the end of the summer. \
Our neighbour grows tomatoes, beans and a surprising number of pumpkins every autumn. \
The library closes early on Sundays, so we usually go there on Saturday mornings. \
Nobody expected the quiet student at the back of the class to win the chess tournament. \
When the train finally arrived, the platform was crowded with tired travellers. \
The recipe calls for two eggs, a cup of flour and a pinch of salt. \
Every spring the swallows return to the barn and build their nests under the roof. \
The museum keeps a collection of maps drawn by sailors three hundred years ago. \
I forgot my umbrella at the cafe and walked home through the light rain. \
The engineers tested the bridge with heavy trucks before they opened it to traffic. \
Her brother plays the violin in an orchestra that tours the northern towns each winter. \
The garden path is lined with lavender, and the bees visit it all afternoon. \
We watched the sun set over the hills from the top of the lighthouse. \
The baker opens his shop at five, when the streets are still dark and empty. \
A letter from the council announced that the road would be closed for repairs. \
The puppy chewed one of my shoes and then fell asleep on the other. ";

/// `n` bytes of training text: random words from the list, separated by single spaces.
pub fn training_text(rng: &mut impl Rng, n: usize) -> Vec<u8> {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        let w = words.choose(rng).expect("word list is not empty");
        out.extend_from_slice(w.as_bytes());
        out.push(b' ');
    }
    out.truncate(n);
    out
}

/// One sequence of `n_ctx` bytes from `text`: a prefix of random length cut from the text, then a phrase
/// of `L ~ U[MIN_PHRASE, n_ctx / 2]` bytes cut from elsewhere in it, repeated until the context is full.
pub fn repeated_phrase_from(rng: &mut impl Rng, n_ctx: usize, text: &[u8]) -> Sequence {
    let segment_len = rng.random_range(MIN_PHRASE.min(n_ctx / 2)..=n_ctx / 2);
    let prefix_len = rng.random_range(0..=n_ctx - 2 * segment_len);
    let cut = |rng: &mut _, len: usize| {
        let start = Rng::random_range(rng, 0..=text.len() - len);
        &text[start..start + len]
    };
    let mut tokens: Vec<u32> = cut(rng, prefix_len).iter().map(|&b| u32::from(b)).collect();
    let phrase = cut(rng, segment_len);
    tokens.extend(
        phrase
            .iter()
            .cycle()
            .take(n_ctx - prefix_len)
            .map(|&b| u32::from(b)),
    );
    Sequence {
        tokens,
        prefix_len,
        segment_len,
    }
}

/// [`repeated_phrase_from`] on `text` (e.g. [`HELD_OUT`]).
pub fn repeated_phrase(rng: &mut impl Rng, n_ctx: usize, text: &str) -> Sequence {
    repeated_phrase_from(rng, n_ctx, text.as_bytes())
}

/// [`repeated_phrase_from`] on freshly drawn training text.
pub fn repeated_training_phrase(rng: &mut impl Rng, n_ctx: usize) -> Sequence {
    let text = training_text(rng, 4 * n_ctx);
    repeated_phrase_from(rng, n_ctx, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::trainer::rng;

    #[test]
    fn phrases_repeat_after_a_prefix_of_english_text() {
        let mut r = rng(3, 0);
        for _ in 0..200 {
            for s in [
                repeated_phrase(&mut r, 64, HELD_OUT),
                repeated_training_phrase(&mut r, 64),
            ] {
                assert_eq!(s.tokens.len(), 64);
                assert!((MIN_PHRASE..=32).contains(&s.segment_len));
                assert!(s.prefix_len + 2 * s.segment_len <= 64);
                for i in s.first_predictable()..64 {
                    assert_eq!(s.tokens[i], s.tokens[i - s.segment_len]);
                }
                assert!(s.tokens.iter().all(|&t| (32..127).contains(&t)));
            }
        }
        // The held-out sentences share no sentence with the training text's word list.
        assert!(!WORDS.contains("harbour") && HELD_OUT.contains("harbour"));
    }
}
